"""On-disk layouts of a RocketMQ store: construct schemas and constants. No I/O here."""
