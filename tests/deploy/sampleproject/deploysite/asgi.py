import os

from django.core.asgi import get_asgi_application

from django_simba.servers.asgi import SimbaLifespan

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deploysite.settings")
django_application = get_asgi_application()
application = SimbaLifespan(django_application)  # as docs/deploying.rst says
