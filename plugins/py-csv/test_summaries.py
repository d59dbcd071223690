"""Native unit tests of the py-csv tool logic: python3 -m unittest discover plugins/py-csv"""

import os
import tempfile
import unittest

import summaries
from summaries import ToolFailure, call


class Worktree(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        summaries.ROOT = self.dir.name

    def tearDown(self):
        summaries.ROOT = "/"
        self.dir.cleanup()

    def write(self, rel, text):
        with open(os.path.join(self.dir.name, rel), "w", newline="") as f:
            f.write(text)

    def fails(self, code, name, args):
        with self.assertRaises(ToolFailure) as cm:
            call(name, args)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception.message


class CsvSummary(Worktree):
    def test_types_and_ranges(self):
        self.write("d.csv", "id,price,ok,name,blank\n3,2.5,true,a,\n-1,10,false,b,\n7,0.25,TRUE,c,\n")
        out = call("csv_summary", {"path": "/d.csv"})
        self.assertEqual(out["row_count"], 3)
        self.assertEqual(out["delimiter"], ",")
        cols = {c["name"]: c for c in out["columns"]}
        self.assertEqual(cols["id"], {"name": "id", "type": "integer", "non_empty": 3, "min": -1, "max": 7})
        self.assertEqual((cols["price"]["type"], cols["price"]["min"], cols["price"]["max"]), ("number", 0.25, 10))
        self.assertEqual(cols["ok"]["type"], "boolean")
        self.assertEqual(cols["name"]["type"], "string")
        self.assertNotIn("min", cols["name"])
        self.assertEqual(cols["blank"], {"name": "blank", "type": "empty", "non_empty": 0})

    def test_detects_semicolons_and_counts_ragged_rows(self):
        self.write("s.csv", "a;b\n1;2\n3\n4;5;6\n")
        out = call("csv_summary", {"path": "s.csv"})
        self.assertEqual((out["delimiter"], out["row_count"], out["ragged_rows"]), (";", 3, 2))

    def test_quoted_fields_and_no_header(self):
        self.write("q.csv", '"x, y",1\n"multi\nline",2\n')
        out = call("csv_summary", {"path": "q.csv", "header": False, "delimiter": ","})
        self.assertEqual(out["row_count"], 2)
        self.assertEqual([c["name"] for c in out["columns"]], ["column_1", "column_2"])
        self.assertEqual(out["columns"][1]["max"], 2)

    def test_nan_is_a_string(self):
        self.write("n.csv", "v\nnan\n1\n")
        self.assertEqual(call("csv_summary", {"path": "n.csv"})["columns"][0]["type"], "string")

    def test_errors(self):
        self.fails("not-found", "csv_summary", {"path": "missing.csv"})
        os.mkdir(os.path.join(self.dir.name, "sub"))
        self.fails("invalid-arguments", "csv_summary", {"path": "sub"})
        self.fails("invalid-arguments", "csv_summary", {"path": "/"})
        with open(os.path.join(self.dir.name, "bin.csv"), "wb") as f:
            f.write(b"a\n\xff\n")
        self.assertIn("UTF-8", self.fails("invalid-arguments", "csv_summary", {"path": "bin.csv"}))
        self.fails("unknown-tool", "nope", {})


class TomlSummary(Worktree):
    def test_keys_and_depth(self):
        self.write("c.toml", 'title = "x"\nn = 3\nwhen = 2024-01-02\n[server]\nport = 80\n[server.tls]\non = true\n[[bins]]\nname = "a"\n')
        out = call("toml_summary", {"path": "c.toml"})
        self.assertEqual(
            out["keys"],
            [{"key": "title", "type": "string"}, {"key": "n", "type": "integer"}, {"key": "when", "type": "date"},
             {"key": "server", "type": "table"}, {"key": "bins", "type": "array"}],
        )
        self.assertEqual((out["key_count"], out["table_count"], out["max_depth"]), (9, 3, 3))

    def test_syntax_error_has_position(self):
        self.write("bad.toml", "a = 1\nb = \n")
        self.assertIn("line 2", self.fails("invalid-arguments", "toml_summary", {"path": "bad.toml"}))


if __name__ == "__main__":
    unittest.main()
