"""Child-process execution of acceptance workloads: sampling memory through every view while they run.

Pure: imports no Django or Celery, so it runs on a GPU node without settings or database credentials.
"""
