# syntax=docker/dockerfile:1
# Production image: build the virtualenv in one stage, run it slim and unprivileged.
# PYTHON_IMAGE: any Debian-based image with Python 3.11+ as `python` (CI builds FROM a
# debootstrapped Debian with no registry for images at hand: tests/image/build.sh).
ARG PYTHON_IMAGE=python:3.11-slim

# The dependencies first, from pyproject.toml alone: a change to the code reuses them.
FROM ${PYTHON_IMAGE} AS dependencies
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
RUN python -m venv /opt/companion
ENV PATH=/opt/companion/bin:$PATH
COPY pyproject.toml ./
RUN pip install --no-cache-dir --upgrade pip \
    && python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" > requirements.txt \
    && pip install --no-cache-dir -r requirements.txt

FROM dependencies AS build
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY memory ./memory
COPY scheduler ./scheduler
COPY adapters ./adapters
COPY migrations ./migrations
RUN pip install --no-cache-dir --no-deps .

FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --create-home --uid 10001 companion
COPY --from=build /opt/companion /opt/companion
ENV PATH=/opt/companion/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    COMPANION_LOG_FORMAT=json \
    COMPANION_DATA_DIR=/home/companion/data \
    COMPANION_OPS_HTTP_ENABLED=true \
    COMPANION_OPS_HTTP_HOST=0.0.0.0 \
    COMPANION_OPS_HTTP_PORT=9464
EXPOSE 9464
USER companion
WORKDIR /home/companion
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4).status == 200 else 1)"]
# Migrations run on start (the same path `companion run` takes everywhere).
CMD ["companion", "run"]
