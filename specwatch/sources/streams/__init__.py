"""One streamed completion: the request, its steps, accumulator and figures."""
