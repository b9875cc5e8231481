#pragma once
// Reads the text form written by print() (printer.h) back into a graph.
//
// Grammar (free whitespace between tokens; `#` starts a comment to the end of the line):
//   graph  := 'graph' STRING '{' node* 'return' [ID (',' ID)*] '}'
//   node   := ID '=' OP '(' [ID (',' ID)*] ')' ['{' entry (',' entry)* '}'] ':' type
//   entry  := NAME '=' value            a constant's first entry is 'data' '=' HEX
//   value  := INT | FLOAT | '[' [INT (',' INT)*] ']' | '<' [dim (',' dim)*] '>' | DTYPE | STRING
//   type   := DTYPE '[' [dim (',' dim)*] ']'
//   dim    := factor ('*' factor)*      factor := INT | '?' SYMBOL
//   ID     := '%' DIGITS                the node ids count up from %0
//   INT    := ['-'] DIGITS              FLOAT := ['-'] DIGITS ['.' DIGITS*] [('e'|'E') ['+'|'-'] DIGITS]
//                                       with a '.' or an exponent, or 'inf', '-inf', 'nan'
//   HEX    := '0x' HEXDIGITS*           the constant's bytes, in storage order
//   STRING := '"' chars '"'             escapes \" \\ \n \t \xNN
//
// Requires: nothing.
// Ensures:  a graph that passes verify() (verifier.h), with `inputs` rebuilt from the
//           `input` nodes in order; or kiln::Error "parse error at LINE:COL: ..." naming what
//           was expected and what was found (or, for a graph that reads well but breaks an
//           IR invariant, the node and the invariant).
#include "src/ir/ir.h"

#include <memory>
#include <string>

namespace kiln::ir {

std::shared_ptr<const Graph> parse(const std::string& text);

}  // namespace kiln::ir
