"""Lab 6: everything that belongs to it alone (see ``util/labs/__init__.py``)."""
