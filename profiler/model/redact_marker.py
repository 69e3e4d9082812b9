"""The marker that replaces a secret in everything the tool shows or writes."""

REDACTED = "<redacted>"
