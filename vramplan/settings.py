"""Django settings, read from the environment (12-factor).

Every variable is listed in ``.env.example`` and the README. A bad value stops the process at start
with a message that names the variable, instead of failing later in a request.
"""

import os
import re
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"  # local state of the embedded default: SQLite file, broker folders

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """A strict boolean: ``banana`` is an error, not a silent False."""
    raw = env.str(name, default=str(int(default))).strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off.")


def env_path(name: str, default: Path) -> Path:
    """A path setting; relative paths are taken from the project folder, not the working directory."""
    raw = env.str(name, default="")
    path = Path(raw) if raw else default
    return path if path.is_absolute() else BASE_DIR / path


def env_choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = env.str(name, default=default).strip()
    if raw.upper() not in allowed:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of {', '.join(allowed)}.")
    return raw.upper()


def env_rate(name: str, default: str) -> str:
    """A DRF throttle rate: ``600/minute``, ``10/s``, ``1000/hour``, ``5000/day``."""
    raw = env.str(name, default=default).strip()
    if not re.fullmatch(r"[1-9]\d{0,8}/(s|sec|second|m|min|minute|h|hour|d|day)", raw):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate; use N/second, N/minute, N/hour or N/day.")
    return raw


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = env.str(name, default=str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


DEBUG = env_bool("DJANGO_DEBUG", False)

SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is required when DJANGO_DEBUG is off (set DJANGO_DEBUG=1 for local development)."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-DJANGO_DEBUG-on"

ALLOWED_HOSTS = [h.strip() for h in env.str("ALLOWED_HOSTS", default="localhost,127.0.0.1,[::1]").split(",")]
if any(not h for h in ALLOWED_HOSTS):
    raise ImproperlyConfigured("ALLOWED_HOSTS has an empty entry; give a comma-separated list of host names.")
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env.str("CSRF_TRUSTED_ORIGINS", default="").split(",") if o.strip()]


def _database(url: str) -> dict:
    try:
        config = environ.Env.db_url_config(url)
    except (ImproperlyConfigured, KeyError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r} is not a usable database URL ({exc}); "
            "use postgres://USER@HOST:PORT/NAME or sqlite:////absolute/path.sqlite3."
        ) from None
    engine = config.get("ENGINE", "")
    if engine not in {"django.db.backends.postgresql", "django.db.backends.sqlite3"}:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r}: vramplan supports PostgreSQL and SQLite, not {engine!r}.")
    if engine.endswith("postgresql"):
        config.setdefault("CONN_MAX_AGE", env_int("DATABASE_CONN_MAX_AGE", 60))
        config["CONN_HEALTH_CHECKS"] = True
    else:
        # The embedded default has two writers (web and worker): wait for the lock instead of failing,
        # take it at BEGIN, and let readers run beside the writer (WAL).
        config.setdefault("OPTIONS", {}).update(
            {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
        )
    return config


DATABASE_URL = env.str("DATABASE_URL", default="")
if not DATABASE_URL:
    VAR_DIR.mkdir(exist_ok=True)
    DATABASE_URL = f"sqlite:///{VAR_DIR / 'vramplan.sqlite3'}"
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "vramplan.apps.AdminConfig",  # django.contrib.admin with the vramplan site (vramplan/admin.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "catalog",
    "budgets",
    "measurements",
    "recommendations",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "vramplan.middleware.RejectNulMiddleware",
    "vramplan.middleware.RequireContentLengthMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "vramplan.urls"
WSGI_APPLICATION = "vramplan.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "vramplan" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise serves from here (collectstatic fills it)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "vramplan.parsers.NulSafeJSONParser",
        "vramplan.parsers.NulSafeFormParser",
        "vramplan.parsers.NulSafeMultiPartParser",
    ],
    # JSON as DRF renders it, except an answer already encoded (vramplan.renderers.EncodedJSON) is sent as it is
    "DEFAULT_RENDERER_CLASSES": ["vramplan.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "vramplan.ordering.NullsLastOrderingFilter",  # unpriced configurations last, either direction
    ],
    "DEFAULT_PAGINATION_CLASS": "vramplan.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "vramplan.api.exception_handler",
    # Per user, counted in the default cache (CACHES below); vramplan/throttling.py says which endpoints use which.
    "DEFAULT_THROTTLE_RATES": {
        "user": env_rate("API_THROTTLE_RATE", "600/minute"),
        "estimate": env_rate("API_THROTTLE_ESTIMATE_RATE", "300/minute"),
        "recommend": env_rate("API_THROTTLE_RECOMMEND_RATE", "60/minute"),
        "job_start": env_rate("API_THROTTLE_JOB_START_RATE", "10/minute"),
    },
    "DEFAULT_THROTTLE_CLASSES": ["vramplan.throttling.UserThrottle"],
    # The client address that anonymous requests and sign-ins are counted by (vramplan.throttling.client_address):
    # REMOTE_ADDR, unless this many proxies of yours in front each append to X-Forwarded-For. A client can
    # write X-Forwarded-For itself: trusting more proxies than there are lets it pick a new address per request.
    "NUM_PROXIES": env_int("VRAMPLAN_TRUSTED_PROXIES", 0),
}
# Recommendations an account may have running at once (vramplan.throttling.one_at_a_time): a rate counts requests,
# not the seconds each one holds a server worker.
VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT = env_int("VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT", 1)

# Failed sign-ins (admin and /api-auth/login/) per username and per client address within a window opened by the
# first; beyond either, sign-ins are refused until the window closes (vramplan/login_limit.py).
LOGIN_FAILURES_PER_USERNAME = env_int("LOGIN_FAILURES_PER_USERNAME", 5, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 20, minimum=1)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1)

SPECTACULAR_SETTINGS = {
    "TITLE": "vramplan API",
    "DESCRIPTION": (
        "GPU hardware selection with measured evidence: the device catalog, memory budgets, "
        "recommendations and acceptance measurements. Memory is always in bytes unless a field says otherwise."
    ),
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",  # the workload body is pydantic JSON Schema (2020-12), which 3.1 speaks natively
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "vramplan.openapi.document_limits"],
}

# Celery: the database holds job state; the broker only carries messages. With no
# CELERY_BROKER_URL the embedded default is kombu's filesystem transport, which needs no server.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.split("://", 1)[0] not in {"filesystem", "redis", "rediss", "memory"}:
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use redis://HOST:PORT/DB, or leave it unset for the "
        "embedded filesystem transport."
    )
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = env_path("CELERY_FILESYSTEM_DIR", VAR_DIR / "broker")
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control, in the repo root
        "store_processed": False,
    }

# The default cache holds the API rate limits, so every web process must share it: CACHE_URL when set
# (django-environ's cache URLs: redis://HOST:PORT/DB, locmemcache://, ...), else Redis when the broker is
# Redis (its database, keys under CACHE_KEY_PREFIX), else process memory: the embedded default needs no
# server (one runserver process), and `check --deploy` warns about it (vramplan.W001).
CACHE_KEY_PREFIX = env.str("CACHE_KEY_PREFIX", default="vramplan-cache")
CACHE_URL = env.str("CACHE_URL", default="")
if CACHE_URL:
    try:
        _cache = environ.Env.cache_url_config(CACHE_URL)
    except (ImproperlyConfigured, KeyError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"CACHE_URL={CACHE_URL!r} is not a usable cache URL ({exc}); use redis://HOST:PORT/DB or locmemcache://."
        ) from None
    # django-environ lower-cases ?key_prefix=, ?timeout=, ... for Django's Redis backend; Django reads them upper-case.
    _cache = {key.upper() if key.islower() else key: value for key, value in _cache.items()}
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CELERY_BROKER_URL}
else:
    _cache = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "vramplan"}
if _cache["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    _cache["BACKEND"] = "vramplan.cache.RedisCache"  # clear() deletes its own keys, never FLUSHDB on the broker
_cache.setdefault("KEY_PREFIX", CACHE_KEY_PREFIX)
CACHES = {"default": _cache}

CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
_HEARTBEAT_SECONDS = float(env_int("NODE_HEARTBEAT_SECONDS", 60, minimum=5))
CELERY_BEAT_SCHEDULE: dict[str, dict[str, str | float]] = {
    "node-heartbeat": {"task": "workers.tasks.node_heartbeat_dispatch", "schedule": _HEARTBEAT_SECONDS},
    # Re-queue jobs whose node went silent, re-send lost messages, give queued jobs to free nodes.
    "acceptance-jobs-reap": {"task": "workers.tasks.acceptance_jobs_reap", "schedule": _HEARTBEAT_SECONDS},
}

# Acceptance jobs: the synthetic workload's time limit (registered programs carry their own), and the
# longest any job may run. Redis redelivers an unacknowledged message after the visibility timeout, so
# it must outlast the longest job; a redelivered duplicate finds its row claimed and does nothing.
ACCEPTANCE_JOB_TIME_LIMIT_SECONDS = env_int("ACCEPTANCE_JOB_TIME_LIMIT_SECONDS", 3600, minimum=10)
ACCEPTANCE_JOB_MAX_SECONDS = 7 * 86_400  # RegisteredProgram.time_limit_seconds is capped here
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": ACCEPTANCE_JOB_MAX_SECONDS + 3600}

# The node this process runs on, when it is a worker (name shown in the catalog's node list).
VRAMPLAN_NODE_NAME = env.str("VRAMPLAN_NODE_NAME", default="")
# On a node whose worker runs as root: the unprivileged account acceptance jobs run as. The child then
# cannot read the worker's environment (/proc/<pid>/environ) or files such as .env and ~/.pgpass.
VRAMPLAN_JOB_USER = env.str("VRAMPLAN_JOB_USER", default="")
if VRAMPLAN_JOB_USER:
    import pwd

    try:
        pwd.getpwnam(VRAMPLAN_JOB_USER)
    except KeyError:
        raise ImproperlyConfigured(f"VRAMPLAN_JOB_USER={VRAMPLAN_JOB_USER!r} is not a user on this machine.") from None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    },
}

# Behind TLS (the production case) cookies are sent over HTTPS only. The redirect to HTTPS and HSTS
# are off by default because TLS usually ends at a proxy in front of gunicorn; turn them on there.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if env_bool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

# The largest request body, in bytes, checked against Content-Length before the body is read: above it the
# API answers 413 naming the limit (vramplan.api). A workload is a few KB; a measurement document with the
# longest timeline (5,000 points) about 0.2 MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2**20, minimum=1024)

# The web process's cyclic garbage collector (vramplan.wsgi): the net count of new container objects between
# two young collections. At Python's 700, ranking the full catalog for a recommendation ran about 7 young
# collections, and a full one (over every live object) every ~16 rankings; at 50,000, none in 50 rankings
# (`python -m benchmarks.load --part http` prints "Garbage collections per ranking"). 0 keeps Python's 700.
WEB_GC_GEN0_THRESHOLD = env_int("WEB_GC_GEN0_THRESHOLD", 50_000)

# Model presets for the budget engine (read by budgets.engine through this environment variable).
_fixtures = env.str("VRAMPLAN_FIXTURES_DIR", default="")
if _fixtures:
    _fixtures_dir = env_path("VRAMPLAN_FIXTURES_DIR", BASE_DIR / "fixtures")
    if not (_fixtures_dir / "model_presets.json").is_file():
        raise ImproperlyConfigured(f"VRAMPLAN_FIXTURES_DIR={_fixtures!r} has no model_presets.json.")
    os.environ["VRAMPLAN_FIXTURES_DIR"] = str(_fixtures_dir)
