"""The judge prompt texts: rubric.md (shared) and one <domain>.md per domain (package data)."""
