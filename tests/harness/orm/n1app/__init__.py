"""The Django application of n1.py: installed (INSTALLED_APPS), so that a many-to-many's
reverse lookups resolve — a model outside an installed application has no related objects."""
