"""The py-csv tools as plain Python: `csv_summary` and `toml_summary`.

No WIT types here, so the logic runs (and is unit-tested) with a normal
python3: `python3 -m unittest discover plugins/py-csv`. `app.py` is the
component glue. Inside the component the worktree is the only filesystem,
preopened as `/` (`ROOT`); the sandbox refuses anything outside it.
"""

import csv
import io
import os
import tomllib
import datetime

# The worktree as the guest sees it. Tests point it at a temp dir.
ROOT = "/"

# Files larger than this are refused with `too-large` before reading.
MAX_FILE_BYTES = 64 << 20
# Delimiters `csv_summary` tries when none is given.
DELIMITERS = ",;\t|"

ANY_SCALAR = {"type": ["integer", "number", "string", "boolean"]}


class ToolFailure(Exception):
    """A tool error: `code` is a WIT `error-code` name (`not-found`, ...)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def worktree_path(raw):
    """Maps a model path (relative to the worktree; a leading `/` means the
    worktree root) to the guest path. `..` is left to the sandbox."""
    if not isinstance(raw, str) or not raw.strip("/"):
        raise ToolFailure("invalid-arguments", "`path` must name a file in the worktree")
    return os.path.join(ROOT, raw.lstrip("/"))


def read_text(raw):
    """Reads a worktree file as UTF-8 text, mapping OS errors to tool errors."""
    path = worktree_path(raw)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise ToolFailure("too-large", f"{raw}: {size} bytes, over the {MAX_FILE_BYTES}-byte limit")
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ToolFailure("not-found", f"{raw}: no such file in the worktree")
    except IsADirectoryError:
        raise ToolFailure("invalid-arguments", f"{raw}: is a directory")
    except PermissionError as e:
        raise ToolFailure("permission-denied", f"{raw}: refused by the sandbox ({e.strerror or e})")
    except OSError as e:
        raise ToolFailure("io", f"{raw}: {e.strerror or e}")
    try:
        # Not "utf-8-sig": codecs load lazily, and the component has no
        # standard library on disk at run time (only what app.py imported
        # while componentize-py pre-initialized it).
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise ToolFailure("invalid-arguments", f"{raw}: not UTF-8 text (byte {e.start})")


# ---------------------------------------------------------------- csv_summary

CSV_INPUT = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "CSV file, relative to the worktree root."},
        "delimiter": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1,
            "description": "Field delimiter. Default: detected among , ; TAB |.",
        },
        "header": {"type": "boolean", "default": True, "description": "The first row names the columns."},
    },
    "required": ["path"],
    "additionalProperties": False,
}

CSV_OUTPUT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "delimiter": {"type": "string"},
        "row_count": {"type": "integer", "minimum": 0, "description": "Data rows (header excluded)."},
        "ragged_rows": {"type": "integer", "minimum": 0, "description": "Rows whose field count differs from the column count."},
        "columns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "type": {"enum": ["integer", "number", "boolean", "string", "empty"]},
                    "non_empty": {"type": "integer", "minimum": 0},
                    "min": {"type": "number"},
                    "max": {"type": "number"},
                },
                "required": ["name", "type", "non_empty"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["path", "delimiter", "row_count", "ragged_rows", "columns"],
    "additionalProperties": False,
}


def parse_number(cell):
    """The cell as int or float, or None. `nan`/`inf` are not numbers here."""
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


class Column:
    """Running type guess and numeric range of one column."""

    def __init__(self, name):
        self.name = name
        self.non_empty = 0
        self.kinds = set()
        self.min = None
        self.max = None

    def add(self, cell):
        cell = cell.strip()
        if not cell:
            return
        self.non_empty += 1
        if cell.lower() in ("true", "false"):
            self.kinds.add("boolean")
            return
        value = parse_number(cell)
        if value is None:
            self.kinds.add("string")
            return
        self.kinds.add("integer" if isinstance(value, int) else "number")
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def type_guess(self):
        if not self.kinds:
            return "empty"
        if self.kinds <= {"integer"}:
            return "integer"
        if self.kinds <= {"integer", "number"}:
            return "number"
        if self.kinds == {"boolean"}:
            return "boolean"
        return "string"

    def summary(self):
        out = {"name": self.name, "type": self.type_guess(), "non_empty": self.non_empty}
        if out["type"] in ("integer", "number"):
            out["min"], out["max"] = self.min, self.max
        return out


def detect_delimiter(text):
    """The candidate that occurs most often in the first line (`,` on a tie)."""
    first = text[:65536].split("\n", 1)[0]
    return max(DELIMITERS, key=lambda d: (first.count(d), d == ","))


def csv_summary(args):
    raw = args.get("path")
    text = read_text(raw)
    delimiter = args.get("delimiter") or detect_delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    columns, rows, ragged = None, 0, 0
    try:
        for record in reader:
            if columns is None:
                names = record if args.get("header", True) else [f"column_{i + 1}" for i in range(len(record))]
                columns = [Column(n) for n in names]
                if args.get("header", True):
                    continue
            rows += 1
            ragged += len(record) != len(columns)
            for col, cell in zip(columns, record):
                col.add(cell)
    except csv.Error as e:
        raise ToolFailure("invalid-arguments", f"{raw}: not valid CSV at line {reader.line_num}: {e}")
    return {
        "path": raw,
        "delimiter": delimiter,
        "row_count": rows,
        "ragged_rows": ragged,
        "columns": [c.summary() for c in columns or []],
    }


# --------------------------------------------------------------- toml_summary

TOML_TYPES = ["string", "integer", "float", "boolean", "datetime", "date", "time", "array", "table"]

TOML_INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "TOML file, relative to the worktree root."}},
    "required": ["path"],
    "additionalProperties": False,
}

TOML_OUTPUT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "keys": {
            "type": "array",
            "description": "Top-level keys in file order.",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "type": {"enum": TOML_TYPES}},
                "required": ["key", "type"],
                "additionalProperties": False,
            },
        },
        "key_count": {"type": "integer", "minimum": 0, "description": "Keys at every depth."},
        "table_count": {"type": "integer", "minimum": 0, "description": "Tables below the root, array items included."},
        "max_depth": {"type": "integer", "minimum": 0, "description": "1: only top-level keys; each table or array level adds 1."},
    },
    "required": ["path", "keys", "key_count", "table_count", "max_depth"],
    "additionalProperties": False,
}


def toml_type(value):
    # bool before int (bool is an int), datetime before date (a subclass).
    for py, name in (
        (bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"),
        (datetime.datetime, "datetime"), (datetime.date, "date"), (datetime.time, "time"),
        (list, "array"), (dict, "table"),
    ):
        if isinstance(value, py):
            return name
    return "string"


def toml_stats(doc):
    """(key count, table count, max depth), iteratively (no recursion limit)."""
    keys = tables = depth = 0
    todo = [(doc, 0)]
    while todo:
        value, d = todo.pop()
        depth = max(depth, d)
        if isinstance(value, dict):
            keys += len(value)
            tables += d > 0
            todo.extend((v, d + 1) for v in value.values())
        elif isinstance(value, list):
            todo.extend((v, d + 1) for v in value)
    return keys, tables, depth


def toml_summary(args):
    raw = args.get("path")
    text = read_text(raw)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ToolFailure("invalid-arguments", f"{raw}: not valid TOML: {e}")
    except RecursionError:
        raise ToolFailure("too-large", f"{raw}: nested too deeply")
    keys, tables, depth = toml_stats(doc)
    return {
        "path": raw,
        "keys": [{"key": k, "type": toml_type(v)} for k, v in doc.items()],
        "key_count": keys,
        "table_count": tables,
        "max_depth": depth,
    }


# ---------------------------------------------------------------- the catalog

class ToolSpec:
    def __init__(self, name, title, description, input_schema, output_schema, run):
        self.name, self.title, self.description = name, title, description
        self.input_schema, self.output_schema, self.run = input_schema, output_schema, run


TOOLS = [
    ToolSpec(
        "csv_summary",
        "Summarise a CSV file",
        "Parses a CSV file in the worktree and returns its columns, the row count, a type "
        "guess per column (integer, number, boolean, string, empty) and min/max of numeric columns.",
        CSV_INPUT,
        CSV_OUTPUT,
        csv_summary,
    ),
    ToolSpec(
        "toml_summary",
        "Summarise a TOML file",
        "Parses a TOML file in the worktree (tomllib) and returns its top-level keys with their "
        "types, the number of keys and tables at every depth, and the nesting depth. "
        "A syntax error is reported with its line and column.",
        TOML_INPUT,
        TOML_OUTPUT,
        toml_summary,
    ),
]


def call(name, args):
    """Runs tool `name`; raises ToolFailure on a tool error."""
    for spec in TOOLS:
        if spec.name == name:
            if not isinstance(args, dict):
                raise ToolFailure("invalid-arguments", "arguments must be a JSON object")
            return spec.run(args)
    raise ToolFailure("unknown-tool", f"unknown tool `{name}`")
