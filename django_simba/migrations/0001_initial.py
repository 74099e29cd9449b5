"""The tables of the database backend: simba_session, simba_lease, simba_member."""

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
            ],
            options={
                "verbose_name": "lease",
                "db_table": "simba_lease",
                "indexes": [models.Index(fields=["session_id"], name="simba_lease_session")],
                "permissions": [("force_release_lease", "Can force-release a lease")],
            },
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
