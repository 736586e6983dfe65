# matchcast: the replayer and consumers in one image.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY events ./events
COPY simulator ./simulator
COPY consumers ./consumers
COPY matchcast ./matchcast
RUN pip install . && useradd --system --uid 10001 matchcast
USER matchcast

ENTRYPOINT ["matchcast"]
CMD ["--help"]
