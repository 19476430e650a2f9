package org.ackspec.shim;

/** An error the shim reports with a protocol kind (docs/shim-protocol.md section 2). */
final class ShimError extends Exception {
    private static final long serialVersionUID = 1L;
    final String kind;

    ShimError(String kind, String message) {
        super(message);
        this.kind = kind;
    }

    static ShimError notApplicable(String message) {
        return new ShimError("NotApplicable", message);
    }

    static ShimError badRequest(String message) {
        return new ShimError("BadRequest", message);
    }
}
