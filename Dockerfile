# ctxproxy: the proxy alone (docker-compose.yml adds Redis). Config and workspaces are baked in
# from ./config as defaults and usually mounted over /etc/ctxproxy.

# The wheel is built apart, so the image holds the installed package and no source or build files.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proxy ./proxy
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Dependencies at the versions the test suite ran against (constraints.txt).
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /wheels /tmp/wheels
RUN pip install --constraint /tmp/constraints.txt /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels /tmp/constraints.txt \
    && useradd --uid 10001 --no-create-home --no-log-init --shell /usr/sbin/nologin ctxproxy

COPY config/compose.toml /etc/ctxproxy/ctxproxy.toml
COPY config/prices.toml /etc/ctxproxy/prices.toml
COPY config/workspaces /etc/ctxproxy/workspaces

USER ctxproxy
ENV CTXPROXY_CONFIG=/etc/ctxproxy/ctxproxy.toml
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/readyz', timeout=3)"]
CMD ["ctxproxy", "serve"]
