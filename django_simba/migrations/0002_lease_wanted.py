from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_simba", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="lease",
            name="wanted",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Another session was refused this name during the current term (polled databases).",
            ),
        ),
    ]
