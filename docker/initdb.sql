-- Runs once, when the container's data directory is first created.
create database docstore;
\connect docstore
create extension pg_docstore;
