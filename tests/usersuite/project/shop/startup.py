"""What django_simba's ready() did in this process (recorded by ShopConfig.ready)."""

ENGINE_STARTED: bool | None = None
