# The kaisched image: the scheduler (`kaisched`) and the PodGrouper (`podgrouper`), installed
# from this checkout (tests/install/test_image.py builds the wheel from exactly what is copied here). Build it with the tag config/deployment.yaml runs:
#   docker build -t kaisched:0.1.0 .
# Stage one builds wheels (kaisched's and its dependencies'); stage two installs only them,
# so no compiler, build tool or source tree ends up in the image.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.cfg README.md ./
COPY kaisched ./kaisched
COPY actions ./actions
COPY plugins ./plugins
COPY podgrouper ./podgrouper
# The data files setup.cfg installs: the CRD schemas (replay and explain check kaisched's
# objects against them). The scenarios of `kaisched simulate` are package data, in
# kaisched/examples/, so the wheel carries them: `kaisched simulate --list` in the image.
COPY config/crds ./config/crds
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels kaisched \
    && groupadd --system --gid 65532 kaisched \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kaisched
# The built-in configuration, for `docker run kaisched:0.1.0`; in a cluster the ConfigMap
# kaisched-config is mounted over /etc/kaisched.
COPY config/scheduler.yaml /etc/kaisched/scheduler.yaml
# Numeric, so Kubernetes can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8081
ENTRYPOINT ["kaisched"]
CMD ["run", "--config", "/etc/kaisched/scheduler.yaml"]
