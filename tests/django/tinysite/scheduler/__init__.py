"""An app of the tiny project that does what users do while the application loads."""
