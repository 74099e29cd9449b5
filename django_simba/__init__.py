"""django-simba: distributed coordination for Django.

Importing the package imports nothing from Django; the public functions load the
Django layer on first use.
"""

__version__ = "0.1.0.dev0"
