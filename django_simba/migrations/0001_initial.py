"""The tables of the database backend: simba_session, simba_lease, simba_member, simba_reclaim."""

from django.db import migrations, models

import django_simba.models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Session",
            fields=[
                (
                    "session_id",
                    django_simba.models.CaseSensitiveCharField(
                        charset="ascii", max_length=32, primary_key=True, serialize=False
                    ),
                ),
                ("expires_at", models.BigIntegerField(help_text="Database time, epoch milliseconds.")),
                (
                    "metadata",
                    django_simba.models.CaseSensitiveCharField(blank=True, default="", max_length=1024),
                ),
            ],
            options={
                "verbose_name": "session",
                "db_table": "simba_session",
                "indexes": [models.Index(fields=["expires_at"], name="simba_session_expires")],
            },
        ),
        migrations.CreateModel(
            name="Lease",
            fields=[
                (
                    "name",
                    django_simba.models.CaseSensitiveCharField(
                        charset="ascii", max_length=128, primary_key=True, serialize=False
                    ),
                ),
                (
                    "session_id",
                    django_simba.models.CaseSensitiveCharField(
                        blank=True, charset="ascii", default="", help_text="Empty when free.", max_length=32
                    ),
                ),
                ("token", models.BigIntegerField(help_text="Term number; never reset.")),
                (
                    "wanted",
                    models.BooleanField(
                        db_default=False,
                        default=False,
                        help_text=(
                            "Another session was refused this name during the current term (polled databases)."
                        ),
                    ),
                ),
                (
                    "freed_at",
                    models.BigIntegerField(
                        db_default=0,
                        default=0,
                        help_text="Database time, epoch milliseconds, when its last term ended (while free).",
                    ),
                ),
            ],
            options={
                "verbose_name": "lease",
                "db_table": "simba_lease",
                "indexes": [models.Index(fields=["session_id", "freed_at"], name="simba_lease_session")],
                "permissions": [("force_release_lease", "Can force-release a lease")],
            },
        ),
        migrations.CreateModel(
            name="ReclaimFloor",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                (
                    "floor",
                    models.BigIntegerField(
                        default=0, help_text="Lease rows made from now on start above this token."
                    ),
                ),
                (
                    "settled",
                    models.BigIntegerField(
                        default=0,
                        help_text="A floor older than any call: free rows with tokens up to it may go.",
                    ),
                ),
                (
                    "raised_at",
                    models.BigIntegerField(
                        default=0,
                        help_text="Database time, epoch milliseconds, when the floor was last raised.",
                    ),
                ),
            ],
            options={"verbose_name": "reclaim floor", "db_table": "simba_reclaim"},
        ),
        migrations.CreateModel(
            name="Member",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "group_name",
                        "session_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("group_name", django_simba.models.CaseSensitiveCharField(max_length=128)),
                ("session_id", django_simba.models.CaseSensitiveCharField(charset="ascii", max_length=32)),
            ],
            options={
                "verbose_name": "group member",
                "db_table": "simba_member",
                "indexes": [models.Index(fields=["session_id"], name="simba_member_session")],
            },
        ),
    ]
