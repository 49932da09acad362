"""The large JSON columns a page reads compressed with LZ4 on PostgreSQL
(issue 33, item 8; docs/architecture.md, "Stored JSON compressed with
LZ4").

A run's results (about 1.7 MB of JSON at 100 experts x 20 metrics x 1,000
candidates) and snapshot, and an analysis's result, are stored out of line
(TOAST) and compressed; PostgreSQL's default, pglz, decompresses a 2.2 MB
document in about 2.4 ms and LZ4 in about 0.6 ms, and the run page reads
its run's results several times in one query (the core, the ranking, the
named candidates). New values are written with LZ4; values stored before
keep pglz until they are written again (both read alike). Nothing happens
on SQLite, or on a PostgreSQL built without LZ4 (``default_toast_compression``
then offers no ``lz4``).
"""

from django.db import migrations

COLUMNS = {"engine_run": ("results", "snapshot"), "engine_analysis": ("result",)}


def _lz4_available(cursor) -> bool:
    cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    row = cursor.fetchone()
    return bool(row and row[0])


def _set(method: str):
    def apply(apps, schema_editor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            if not _lz4_available(cursor):
                return
            for table, columns in COLUMNS.items():
                changes = ", ".join(f"ALTER COLUMN {column} SET COMPRESSION {method}" for column in columns)
                cursor.execute(f"ALTER TABLE {table} {changes}")

    return apply


class Migration(migrations.Migration):
    dependencies = [("engine", "0013_run_newest_index")]

    operations = [migrations.RunPython(_set("lz4"), _set("default"), elidable=False)]
