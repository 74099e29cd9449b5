"""Models of the fencing tests; their tables are created by the ``tables`` fixture on the test's database."""

from __future__ import annotations

from django.db import models

from django_simba.fencing import FencedModel, FencedQuerySet

APP = "fencing_tests"


class Document(FencedModel):
    """A fenced row. ``history`` records, in the statement that writes, who wrote: the order of writes."""

    key = models.CharField(max_length=64, unique=True)
    body = models.TextField(default="")
    history = models.TextField(default="")
    writes = models.IntegerField(default=0)

    class Meta:
        app_label = APP


class Shelf(models.Model):
    label = models.CharField(max_length=32)

    class Meta:
        app_label = APP

    def __str__(self) -> str:
        return self.label


class BookQuerySet(FencedQuerySet["Book"]):
    """A queryset of the model's own, based on FencedQuerySet as docs/fencing.rst says."""

    def on_shelf(self, label: str) -> BookQuerySet:
        return self.filter(shelf__label=label)


class Book(FencedModel):
    """Fenced rows named through a relation (``shelf__label``), with a manager of its own."""

    objects = BookQuerySet.as_manager()

    shelf = models.ForeignKey(Shelf, on_delete=models.CASCADE)
    title = models.CharField(max_length=64)

    class Meta:
        app_label = APP
        constraints = [models.UniqueConstraint(fields=["shelf", "title"], name="fencing_tests_book_title")]


class Plain(models.Model):
    """No fence columns: the fencing API refuses it."""

    key = models.CharField(max_length=64, unique=True)

    class Meta:
        app_label = APP

    def __str__(self) -> str:
        return self.key


class Edition(Document):
    """Multi-table inheritance: the fence columns are in the parent's table, not in this one."""

    isbn = models.CharField(max_length=20, default="")

    class Meta:
        app_label = APP


MODELS = (Document, Shelf, Book, Plain, Edition)
