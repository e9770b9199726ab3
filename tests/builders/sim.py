"""A small scenario for `kaisched simulate`, as YAML text."""
from __future__ import annotations

SMALL = """
name: small
nodePools:
  - {name: gpu, count: 2, capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}}
queues:
  - {name: team-a, resources: {nvidia.com/gpu: {quota: 8, limit: 16}}}
  - {name: team-b, resources: {nvidia.com/gpu: {quota: 8}}}
jobs:
  - name: first
    kind: PyTorchJob
    queue: team-a
    duration: 10m
    roles:
      master: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
      worker: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
  - name: second
    kind: MPIJob
    queue: team-b
    arrival: 1m
    duration: 5m
    roles:
      launcher: {replicas: 1, requests: {cpu: 1, memory: 1Gi}}
      worker: {replicas: 2, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
  - name: third
    kind: Job
    queue: team-b
    arrival: 2m
    duration: 3m
    roles:
      main: {replicas: 2, requests: {cpu: 1, memory: 1Gi, gpu: 1}}
"""
