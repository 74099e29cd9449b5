"""An app that starts an election in ready(), as users do for a scheduler, and may take a lock there."""

import os

from django.apps import AppConfig


class LeaderConfig(AppConfig):
    name = "deploysite.leader"

    def ready(self) -> None:
        name = os.environ.get("DEPLOY_ELECTION")
        if name:
            from django_simba import election

            self.election = election(name)
        locked = os.environ.get("DEPLOY_LOCK")
        if locked:  # held for the life of the process that loads the project
            from django_simba import lock

            self.term = lock(locked).acquire(10)
