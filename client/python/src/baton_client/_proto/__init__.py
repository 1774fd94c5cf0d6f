"""Stubs generated from proto/baton/v1 when the package is built (see hatch_build.py).

Import them through :mod:`baton_client.pb` (``from baton_client.pb import model_pb2``).
"""
