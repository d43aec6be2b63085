# ctxproxy: the proxy alone (docker-compose.yml adds Redis). Config and workspaces are baked in
# from ./config as defaults and usually mounted over /etc/ctxproxy.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
RUN pip install . && useradd --system --uid 10001 --no-create-home ctxproxy

COPY config/compose.toml /etc/ctxproxy/ctxproxy.toml
COPY config/workspaces /etc/ctxproxy/workspaces

USER ctxproxy
ENV CTXPROXY_CONFIG=/etc/ctxproxy/ctxproxy.toml
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/readyz', timeout=3)"]
CMD ["ctxproxy", "serve"]
