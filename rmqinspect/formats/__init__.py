"""On-disk layouts of a RocketMQ store and the format rules, each written once; no I/O here.

``fields.FieldTable`` declares every fixed-size layout (construct schema, struct, numpy dtype and byte positions
are derived from it); ``properties`` holds the properties-string and ``__CRC32#`` rules; ``javahash`` the Java
String.hashCode and the hashes derived from it; the other modules one file format each (FORMATS.md sections).
"""
