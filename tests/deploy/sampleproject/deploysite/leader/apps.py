"""An app that starts an election in ready(), as users do for a scheduler."""

import os

from django.apps import AppConfig


class LeaderConfig(AppConfig):
    name = "deploysite.leader"

    def ready(self) -> None:
        name = os.environ.get("DEPLOY_ELECTION")
        if name:
            from django_simba import election

            self.election = election(name)
