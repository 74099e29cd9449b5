from django.db import models


class Invoice(models.Model):
    total = models.IntegerField(default=0)
    #: the highest fencing token that wrote this invoice
    fence = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"invoice {self.pk}"
