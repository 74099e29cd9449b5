"""``manage.py publish_report NAME BODY``, run by ``simba_run``: a write fenced by the token it was given.

    python manage.py simba_run --lock reports:daily --manage publish_report daily "the body"

``simba_run`` holds the lock while the command runs and passes its term in
``SIMBA_LEASE`` and ``SIMBA_TOKEN``; exit status 1 if a newer term already wrote the report.
"""

from django.core.management.base import BaseCommand, CommandError

from django_simba.fencing import Fence, StaleToken

from ...reports import save_report


class Command(BaseCommand):
    help = "Write a report under the term of the simba_run that runs this command."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("body")

    def handle(self, *args, name, body, **options):
        term = Fence.from_environ()
        try:
            created = save_report(name, body, term)
        except StaleToken as refused:
            raise CommandError(f"refused: {refused}", returncode=1) from refused
        self.stdout.write(f"{'created' if created else 'updated'} {name} with token {term.token}")
