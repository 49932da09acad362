"""The sign-up endpoints' bodies (docs/accounts.md "Self sign-up")."""

from rest_framework import serializers

from workspace.api.serializers import WriteSerializer


class SignUpRequestSerializer(WriteSerializer):
    email = serializers.CharField(
        max_length=1000, trim_whitespace=False, help_text="The address to sign up with; the link is mailed there."
    )


class SignUpSentSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="The same sentence whether or not an account has the address.")
    email = serializers.CharField(help_text="The address as read (domain in lower case).")
    link_hours = serializers.IntegerField(help_text="How many hours the mailed link works (SIGNUP_LINK_HOURS).")


class SignUpPolicySerializer(serializers.Serializer):
    signup = serializers.ChoiceField(
        choices=["closed", "invitation", "domains", "open"], help_text="The site policy's sign-up setting."
    )
    open = serializers.BooleanField(
        help_text="Whether anyone may ask for a link here now (false when closed, invitation only, or when only "
        "single sign-on signs in)."
    )
    domains = serializers.ListField(
        child=serializers.CharField(), help_text="Under `domains`, the e-mail domains that may sign up (exactly)."
    )
    link_hours = serializers.IntegerField(help_text="How many hours a mailed link works.")


class SignUpCompleteSerializer(WriteSerializer):
    token = serializers.CharField(max_length=1000, trim_whitespace=False, help_text="The token of the mailed link.")
    username = serializers.CharField(max_length=1000, trim_whitespace=False)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})
    name = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, trim_whitespace=False, help_text="A display name (optional)."
    )


class SignedUpSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField(help_text="The account's e-mail address, empty for none.")
    name = serializers.CharField(help_text="The display name, empty for none.")
    email_confirmed = serializers.BooleanField(
        help_text="Whether the owner followed a link mailed to this address (always true for a new sign-up)."
    )
