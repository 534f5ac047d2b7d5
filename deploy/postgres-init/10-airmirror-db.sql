-- Run once by the postgres image when its data volume is empty (mounted at /docker-entrypoint-initdb.d):
-- a second database, next to Airflow's own ('airflow'), for airmirror's metadata DB
-- (airmirror.metadata.db.url in deploy/mm2.properties). airmirror creates its tables there itself.
CREATE ROLE airmirror WITH LOGIN PASSWORD 'airmirror';
CREATE DATABASE airmirror OWNER airmirror;
