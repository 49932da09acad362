#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")
    from django.core.management import execute_from_command_line

    # What a command changes is recorded as coming from a command; each
    # request's (runserver) and each task's say otherwise (workspace.history).
    os.environ.setdefault("APPROVE_HISTORY_SOURCE", "command")

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
