"""One module per measurement: a job that runs in a worker, and a driver that runs rounds of it."""
