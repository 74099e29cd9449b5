"""Read-only admin for coordination state, with a force-release action behind its own permission.

* :mod:`.tables`: the "Leases" and "Sessions" lists (the rows of a backend that
  keeps them, the status page otherwise), registered when Django's admin loads
  this package;
* :mod:`.views`: the pages of every backend: status (``lease/status/``), group
  members (``lease/members/``) and the force-release confirmation;
* :mod:`.dbclock`: the database's clock as an expression, so remaining times
  are computed on the clock the backend uses.

The templates are in ``django_simba/templates/admin/django_simba/``, where
Django's template loaders look for them.

Nothing here can add, change or delete a row. Force-releasing a lease needs
the ``django_simba.force_release_lease`` permission, asks for confirmation,
and is recorded in the admin log and on the ``django_simba.admin`` logger.
"""

from .tables import FORCE_RELEASE_PERMISSION, LeaseAdmin, SessionAdmin

__all__ = ["FORCE_RELEASE_PERMISSION", "LeaseAdmin", "SessionAdmin"]
