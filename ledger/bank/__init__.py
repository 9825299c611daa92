"""Question banks: load, normalise and hash, validate, build in DuckDB, freeze gold, publish.

Stages, in the order data flows: ``source`` (normalised bytes and the content
hash; rows given as data.sqlite, CSV or Parquet files instead of seed.sql are found
there and described by ``ledger.engines.data_files``), ``problems`` (findings naming
file, line, case and field), ``model`` (structural validation into a Bank),
``purity`` (the seed reads no clock, randomness or files), ``build`` (the database on
the bank's engine, table snapshot, gold), ``leak`` (the anti-memorisation check),
``publish`` (the BankPublished event), ``registry`` (built-in and published banks),
``describe`` (what ``bank show``, ``diff`` and ``list`` print) and ``importer``
(BIRD and Spider written as banks).
"""
