"""The demo's tables: a report and a ticker written under fencing tokens, and the ticks of the job."""

from django.db import models

from django_simba.fencing import FencedModel


class Report(FencedModel):
    """A resource rebuilt by whichever instance holds its lease (see reports.save_report)."""

    name = models.CharField(max_length=100, unique=True)
    body = models.TextField(blank=True)

    class Meta:
        app_label = "ticks"

    def __str__(self) -> str:
        return self.name


class Ticker(FencedModel):
    """One per demo run: counts the ticks, fenced like any shared resource."""

    run = models.CharField(max_length=32, unique=True)
    ticks = models.IntegerField(default=0)

    class Meta:
        app_label = "ticks"

    def __str__(self) -> str:
        return self.run


class Tick(models.Model):
    """One row per execution of the job. No unique constraint on purpose: the proof looks for duplicates."""

    run = models.CharField(max_length=32, db_index=True)
    period = models.BigIntegerField(help_text="Which period of the schedule this execution served.")
    token = models.BigIntegerField()
    worker = models.CharField(max_length=64)
    accepted = models.BooleanField(help_text="False when the fence refused the write (a stale token).")
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "ticks"

    def __str__(self) -> str:
        return f"{self.run}/{self.period}"
