"""What operators run: the library functions behind the management commands.

* :mod:`.status`: sessions, leases and groups of a backend at one moment
  (``simba_status``, the admin's status page), and purging expired sessions
  (``simba_purge``);
* :mod:`.runner`: running a command only while holding a lock or leading an
  election (``simba_run``);
* :mod:`.exits`: how the commands turn the library's errors into exit codes;
* :mod:`.lognoise`: keeping client libraries' retry lines out of the commands'
  and the checks' output.

The commands themselves stay in ``django_simba/management/commands/``, where
Django finds them, and are thin layers over these modules.
"""
