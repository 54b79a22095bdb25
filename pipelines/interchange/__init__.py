"""Writers from trajectory datasets into the community's interchange formats (docs/interchange.md)."""
