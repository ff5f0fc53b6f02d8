"""Whether one SQL statement could combine two people's rows, read with PostgreSQL's own
parser (`pglast`).

A statement is fine when every per-person relation it reads (tables distributed by
person, see `tests.support.distribution`) is tied to one person: their distribution
columns are connected by equalities, with each other (`m.user_id = s.user_id`) or with
one and the same value (`m.user_id = $1 AND s.user_id = $1`), including the join
conditions of joined derived tables. Equalities under OR or NOT do not tie anything.

What it cannot judge it reports rather than passes: a column reference it cannot resolve
to one relation is treated as tying nothing, so an ambiguous statement fails.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from pglast import ast, parse_sql
from pglast.enums import BoolExprType

from tests.support.distribution import NOT_PER_PERSON, distribution_column


@dataclass
class _Scope:
    """One query level: its relations by the name they are referred to by."""

    relations: dict[str, str] = field(default_factory=dict)  # alias -> node (or '')
    derived: dict[str, _Scope] = field(default_factory=dict)  # alias -> inner query
    functions: dict[str, str] = field(default_factory=dict)  # alias -> its rows' tie name
    outputs: dict[str, str] = field(default_factory=dict)  # output column -> tie


class _Tie:
    """Union-find over 'ties': a relation's person column, a parameter, a constant."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        self.parent.setdefault(node, node)
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a: str, b: str) -> None:
        """Tie two operands of an equality: persons with persons, and a per-person row's
        key with the same table's key (the same row, so the same person)."""
        if a.startswith("row:") or b.startswith("row:"):
            if not (a.startswith("row:") and b.startswith("row:")):
                return
            a, b = a[4:], b[4:]
            if a.split("#")[0] != b.split("#")[0]:
                return
        self.parent[self.find(a)] = self.find(b)


@dataclass
class Verdict:
    """Per-person relations a statement reads, and whether they are tied to one person."""

    tables: list[str]
    tied: bool


class _Checker:
    def __init__(self, per_person: set[str], params: tuple[Any, ...] = ()) -> None:
        self.per_person = per_person
        self.params = params
        self.tie = _Tie()
        self.nodes: list[tuple[str, str, int]] = []  # (node, table, group) per relation
        self.counter = 0
        self.group = 0  # rows combined by one query block; UNION branches are separate

    def node(self, table: str) -> str:
        self.counter += 1
        name = f"{table}#{self.counter}"
        self.nodes.append((name, table, self.group))
        return name

    # statements -------------------------------------------------------------------

    def statement(self, stmt: Any, outer: list[_Scope]) -> _Scope:
        if isinstance(stmt, ast.SelectStmt):
            return self.select(stmt, outer)
        scope = _Scope()
        chain = [*outer, scope]
        if isinstance(stmt, ast.InsertStmt):
            self.ctes(stmt.withClause, chain)
            if stmt.selectStmt is not None:
                self.statement(stmt.selectStmt, chain)
            return scope  # its RETURNING names new rows: no tie to anything read
        if isinstance(stmt, ast.UpdateStmt | ast.DeleteStmt):
            self.ctes(stmt.withClause, chain)
            self.relation(stmt.relation, scope, chain)
            extra = stmt.fromClause if isinstance(stmt, ast.UpdateStmt) else stmt.usingClause
            for item in extra or ():
                self.from_item(item, scope, chain)
            self.quals(stmt.whereClause, chain)
            returning = stmt.returningClause
            self.remember_outputs(returning.exprs if returning else None, scope, chain)
            return scope
        return scope

    def ctes(self, with_clause: Any, chain: list[_Scope]) -> None:
        if with_clause is None:
            return
        for cte in with_clause.ctes or ():
            inner = self.statement(cte.ctequery, chain)
            chain[-1].derived[cte.ctename] = inner
            chain[-1].relations[cte.ctename] = ""

    def select(self, stmt: ast.SelectStmt, outer: list[_Scope]) -> _Scope:
        scope = _Scope()
        chain = [*outer, scope]
        self.ctes(stmt.withClause, chain)
        if stmt.larg is not None:  # UNION / INTERSECT / EXCEPT: branches apart
            for branch in (stmt.larg, stmt.rarg):
                self.counter += 1
                outer_group, self.group = self.group, self.counter
                self.statement(branch, chain)
                self.group = outer_group
            return scope
        for item in stmt.fromClause or ():
            self.from_item(item, scope, chain)
        self.quals(stmt.whereClause, chain)
        self.quals(stmt.havingClause, chain)
        for target in stmt.targetList or ():
            self.subqueries(target, chain)
        self.remember_outputs(stmt.targetList, scope, chain)
        return scope

    def remember_outputs(self, targets: Any, scope: _Scope, chain: list[_Scope]) -> None:
        """What a query's output columns stand for (a person, a row), for the query that
        reads it as a derived table, a CTE or an IN list; `*` passes every tie through."""
        for target in targets or ():
            ref = target.val
            if not isinstance(ref, ast.ColumnRef):
                continue
            names = [getattr(f, "sval", None) for f in ref.fields]
            if names[-1] is None:  # * or alias.*: every column of the relations named
                for alias in [names[0]] if len(names) == 2 else list(scope.relations):
                    for column in ("user_id", "id", "token"):
                        tie = (
                            self.person_of(scope, alias, column)
                            if alias in scope.relations
                            else None
                        )
                        if tie is not None:
                            scope.outputs.setdefault(column, tie)
                continue
            resolved = self.resolve(ref, chain)
            if resolved is not None:
                scope.outputs[target.name or names[-1]] = resolved

    def from_item(self, item: Any, scope: _Scope, chain: list[_Scope]) -> None:
        if isinstance(item, ast.RangeVar):
            self.relation(item, scope, chain)
        elif isinstance(item, ast.JoinExpr):
            self.from_item(item.larg, scope, chain)
            self.from_item(item.rarg, scope, chain)
            self.quals(item.quals, chain)
            for column in item.usingClause or ():  # JOIN ... USING (user_id)
                if column.sval == "user_id":
                    self.tie_using(item, chain)
        elif isinstance(item, ast.RangeSubselect):
            inner = self.statement(item.subquery, chain if item.lateral else chain[:-1])
            alias = item.alias.aliasname if item.alias is not None else f"sub{self.counter}"
            scope.relations[alias] = ""
            scope.derived[alias] = inner
        elif isinstance(item, ast.RangeFunction):
            alias = item.alias.aliasname if item.alias is not None else "function"
            scope.relations[alias] = ""
            self.counter += 1
            scope.functions[alias] = f"{alias}@{self.counter}"  # e.g. unnest(...) AS p(user_id)

    def relation(self, rv: ast.RangeVar, scope: _Scope, chain: list[_Scope]) -> None:
        name = rv.alias.aliasname if rv.alias is not None else rv.relname
        for level in reversed(chain):  # a CTE of that name
            if rv.relname in level.derived and rv.schemaname is None:
                scope.relations[name] = ""
                scope.derived[name] = level.derived[rv.relname]
                return
        table = rv.relname
        if table in self.per_person:
            node = self.node(table)
            scope.relations[name] = node
        else:
            scope.relations[name] = ""

    def tie_using(self, join: ast.JoinExpr, chain: list[_Scope]) -> None:
        nodes = [
            n
            for side in (join.larg, join.rarg)
            if isinstance(side, ast.RangeVar)
            and (n := chain[-1].relations.get(side.alias.aliasname if side.alias else side.relname))
        ]
        for a, b in itertools.pairwise(nodes):
            self.tie.union(a, b)

    # predicates -------------------------------------------------------------------

    def quals(self, expr: Any, chain: list[_Scope], *, tying: bool = True) -> None:
        if expr is None:
            return
        if isinstance(expr, ast.BoolExpr):
            and_ = expr.boolop == BoolExprType.AND_EXPR
            for arg in expr.args:
                self.quals(arg, chain, tying=tying and and_)
            return
        if isinstance(expr, ast.A_Expr) and tying and _is_equality(expr):
            left, right = self.side(expr.lexpr, chain), self.side(expr.rexpr, chain)
            if left is not None and right is not None:
                self.tie.union(left, right)
            return
        self.subqueries(expr, chain, tying=tying)

    def side(self, expr: Any, chain: list[_Scope]) -> str | None:
        """One side of an equality; a scalar subquery stands for its one output."""
        if isinstance(expr, ast.SubLink):
            inner = self.statement(expr.subselect, chain)
            return next(iter(inner.outputs.values())) if len(inner.outputs) == 1 else None
        self.subqueries(expr, chain)
        return self.operand(expr, chain)

    def subqueries(self, expr: Any, chain: list[_Scope], *, tying: bool = True) -> None:
        """Subqueries inside an expression (EXISTS, IN, scalar): checked, correlated to
        `chain`; an `x IN (SELECT user_id ...)` ties x to the inner person."""
        for sub in _sublinks(expr):
            inner = self.statement(sub.subselect, chain)
            if tying and sub.testexpr is not None and len(inner.outputs) == 1:
                outer = self.operand(sub.testexpr, chain)
                if outer is not None:  # x IN (SELECT y ...): x = y
                    self.tie.union(outer, next(iter(inner.outputs.values())))

    def operand(self, expr: Any, chain: list[_Scope]) -> str | None:
        if isinstance(expr, ast.ParamRef):
            if 0 < expr.number <= len(self.params):  # equal values tie, as in this execution
                return f"value:{self.params[expr.number - 1]!r}"
            return f"${expr.number}"
        if isinstance(expr, ast.A_Const):
            return f"const:{expr.val!r}"
        if isinstance(expr, ast.TypeCast):
            return self.operand(expr.arg, chain)
        if isinstance(expr, ast.ColumnRef):
            return self.resolve(expr, chain)
        return None

    def resolve(self, ref: ast.ColumnRef, chain: list[_Scope]) -> str | None:
        """The tie a column stands for: a per-person relation's person column (or a
        derived table's `user_id`); None for any other column."""
        names = [getattr(f, "sval", None) for f in ref.fields]
        if None in names:
            return None
        column = names[-1]
        if len(names) >= 2:
            alias = names[-2]
            for level in reversed(chain):
                if alias in level.relations:
                    return self.person_of(level, alias, column)
            return None
        for level in reversed(chain):  # unqualified: the one relation that could hold it
            persons = [
                tie
                for alias in level.relations
                if (tie := self.person_of(level, alias, column)) is not None
            ]
            if len(persons) == 1:
                return persons[0]
            if level.relations:
                return None
        return None

    def person_of(self, scope: _Scope, alias: str, column: str) -> str | None:
        """The tie of `alias.column`: the relation's person, or its row (its key)."""
        node = scope.relations[alias]
        if node:
            table = node.split("#")[0]
            if column == distribution_column(table):
                return node
            return f"row:{node}" if column == _KEYS.get(table, "id") else None
        inner = scope.derived.get(alias)
        if inner is not None:
            return inner.outputs.get(column)
        if alias in scope.functions and column == "user_id":
            return f"fn:{scope.functions[alias]}"
        return None

    def verdict(self) -> Verdict:
        tables = [table for _node, table, _group in self.nodes]
        groups: dict[int, set[str]] = {}
        for node, _table, group in self.nodes:
            groups.setdefault(group, set()).add(self.tie.find(node))
        return Verdict(tables, all(len(roots) <= 1 for roots in groups.values()))


_KEYS = {"button_actions": "token"}  # a per-person table's key column, if not `id`


def _is_equality(expr: ast.A_Expr) -> bool:
    names = [getattr(n, "sval", None) for n in expr.name or ()]
    return names == ["="] and expr.kind.name == "AEXPR_OP"


def _sublinks(expr: Any) -> list[ast.SubLink]:
    """SubLinks directly inside `expr` (not inside nested SubLinks)."""
    found: list[ast.SubLink] = []

    def walk(node: Any) -> None:
        if isinstance(node, ast.SubLink):
            found.append(node)
            return
        if isinstance(node, tuple | list):
            for item in node:
                walk(item)
        elif isinstance(node, ast.Node):
            for name in node:
                walk(getattr(node, name))

    walk(expr)
    return found


def check(sql: str, params: tuple[Any, ...] = ()) -> Verdict:
    """The per-person tables `sql` reads and whether they are tied to one person (with
    `params`, the values of one execution: parameters of equal value tie)."""
    per_person = _known_tables() - set(NOT_PER_PERSON)
    checker = _Checker(per_person, params)
    for raw in parse_sql(sql):
        checker.statement(raw.stmt, [])
    return checker.verdict()


def _known_tables() -> set[str]:
    from memory.store.tables import Base

    return set(Base.metadata.tables)
