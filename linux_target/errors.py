"""The one exception type the shim uses to carry a gRPC status code and a message."""

from __future__ import annotations

import grpc


class P4RuntimeError(Exception):
    """A request the shim refuses; ``code`` becomes the gRPC / p4.v1.Error code."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)
