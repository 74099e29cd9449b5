# The models became FencedModel subclasses: the old "fence" column keeps its values as fence_token,
# and fence_lease is added ("" for rows written before: the next fenced write claims them).

from django.db import migrations

import django_simba.fencing.fields


class Migration(migrations.Migration):
    dependencies = [
        ("ticks", "0001_initial"),
    ]

    operations = [
        migrations.RenameField(model_name="report", old_name="fence", new_name="fence_token"),
        migrations.AlterField(
            model_name="report",
            name="fence_token",
            field=django_simba.fencing.fields.FenceTokenField(
                help_text="The highest fencing token that wrote this row (0: none yet)."
            ),
        ),
        migrations.AddField(
            model_name="report",
            name="fence_lease",
            field=django_simba.fencing.fields.FenceLeaseField(
                help_text="The lease whose tokens fence this row."
            ),
        ),
        migrations.RenameField(model_name="ticker", old_name="fence", new_name="fence_token"),
        migrations.AlterField(
            model_name="ticker",
            name="fence_token",
            field=django_simba.fencing.fields.FenceTokenField(
                help_text="The highest fencing token that wrote this row (0: none yet)."
            ),
        ),
        migrations.AddField(
            model_name="ticker",
            name="fence_lease",
            field=django_simba.fencing.fields.FenceLeaseField(
                help_text="The lease whose tokens fence this row."
            ),
        ),
    ]
