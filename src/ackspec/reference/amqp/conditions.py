"""The AMQP 1.0 error conditions (2.8.15-2.8.18, 4.5) the reference broker sends."""

from __future__ import annotations

ERR_TRANSFER_LIMIT = "amqp:link:transfer-limit-exceeded"
ERR_NOT_FOUND = "amqp:not-found"
ERR_INVALID_FIELD = "amqp:invalid-field"
ERR_NOT_ALLOWED = "amqp:not-allowed"
ERR_UNKNOWN_TXN = "amqp:transaction:unknown-id"
ERR_TXN_ROLLBACK = "amqp:transaction:rollback"
ERR_FORCED = "amqp:connection:forced"
ERR_DECODE = "amqp:decode-error"
ERR_UNAUTHORIZED = "amqp:unauthorized-access"
ERR_RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
ERR_MESSAGE_SIZE = "amqp:link:message-size-exceeded"
