"""The index look-ups a broker answers, one module per question: the broker's key query (``query``), what a
restart does to its answers (``fates``), message ids (``msgid``), and why a message is not found (``explain``)."""
