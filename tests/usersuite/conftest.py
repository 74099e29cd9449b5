# The user's project is run by test_usersuite.py in a child pytest with its own settings, never here.
collect_ignore = ["project"]
