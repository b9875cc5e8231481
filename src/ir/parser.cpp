#include "src/ir/parser.h"

#include "src/ir/verifier.h"
#include "src/support/check.h"
#include "src/support/checked.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

namespace kiln::ir {
namespace {

struct Pos {
    int line = 1, col = 1;
};

struct Token {
    enum Kind { End, Ident, Int, Float, Str, Hex, Sym, Id, Punct } kind = End;
    std::string_view text;  // as written (Hex: the digits after 0x; Sym: the name after '?')
    Pos pos;
    std::int64_t ival = 0;  // Int, Id
    double fval = 0;        // Float
    std::string sval;       // Str: the decoded value
    bool is(char c) const { return kind == Punct && text.size() == 1 && text[0] == c; }
    bool is_word(std::string_view w) const { return kind == Ident && text == w; }
};

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string describe(const Token& t) {
    switch (t.kind) {
    case Token::End: return "end of input";
    case Token::Hex: return "0x data";
    default: break;
    }
    std::string_view s = t.text;
    std::string prefix = t.kind == Token::Sym ? "?" : t.kind == Token::Id ? "%" : "";
    if (t.kind == Token::Str) return s.size() > 32 ? "a string" : std::string(s);
    if (s.size() > 32) return "'" + prefix + std::string(s.substr(0, 32)) + "...'";
    return "'" + prefix + std::string(s) + "'";
}

class Parser {
public:
    explicit Parser(std::string_view src) : src_(src) { advance(); }

    std::shared_ptr<const Graph> run() {
        auto g = std::make_shared<Graph>();
        expect_word("graph", "at the start of the text");
        if (tok_.kind != Token::Str) error("expected the graph's name as a \"string\" after 'graph'");
        g->name = tok_.sval;
        advance();
        expect_punct('{', "after the graph's name");
        std::vector<Pos> node_pos;
        while (tok_.kind == Token::Id) {
            node_pos.push_back(tok_.pos);
            parse_node(*g);
        }
        Pos ret_pos = tok_.pos;
        if (!tok_.is_word("return"))
            error("expected a node '%" + std::to_string(g->nodes.size()) + " = ...' or 'return'");
        advance();
        if (tok_.kind == Token::Id) {
            g->outputs.push_back(parse_output(*g));
            while (tok_.is(',')) {
                advance();
                if (tok_.kind != Token::Id) error("expected an output id '%N' after ','");
                g->outputs.push_back(parse_output(*g));
            }
        }
        expect_punct('}', "at the end of the graph");
        if (tok_.kind != Token::End) error("expected the end of the text after the graph's '}'");
        for (std::size_t i = 0; i < g->nodes.size(); ++i)
            if (g->nodes[i].op == Op::input) g->inputs.push_back(static_cast<ValueId>(i));
        try {
            verify(*g);
        } catch (const VerifyError& e) {
            Pos p = e.node() >= 0 ? node_pos[static_cast<std::size_t>(e.node())] : ret_pos;
            fail_at(p, e.what());
        }
        return g;
    }

private:
    // ---- errors ----
    [[noreturn]] void fail_at(Pos p, const std::string& msg) const {
        KILN_USER_ERROR("parse error at " << p.line << ":" << p.col << ": " << msg);
    }
    [[noreturn]] void error(const std::string& expected) const {
        fail_at(tok_.pos, expected + ", got " + describe(tok_));
    }
    [[noreturn]] void lex_error(const std::string& msg) const { fail_at(pos_, msg); }

    // ---- lexer ----
    char peek_char(std::size_t ahead = 0) const { return i_ + ahead < src_.size() ? src_[i_ + ahead] : '\0'; }
    void bump() {
        if (src_[i_] == '\n') {
            ++pos_.line;
            pos_.col = 1;
        } else {
            ++pos_.col;
        }
        ++i_;
    }
    void skip_space() {
        while (i_ < src_.size()) {
            char c = src_[i_];
            if (c == '#') {
                while (i_ < src_.size() && src_[i_] != '\n') bump();
            } else if (std::isspace(static_cast<unsigned char>(c))) {
                bump();
            } else {
                break;
            }
        }
    }

    void advance() {
        skip_space();
        tok_ = Token{};
        tok_.pos = pos_;
        std::size_t start = i_;
        if (i_ >= src_.size()) return;
        char c = src_[i_];
        auto take_while = [&](bool (*pred)(char)) {
            while (i_ < src_.size() && pred(src_[i_])) bump();
        };
        if (is_ident_start(c)) {
            take_while(is_ident_char);
            tok_.kind = Token::Ident;
            tok_.text = src_.substr(start, i_ - start);
        } else if (c == '%') {
            bump();
            std::size_t d = i_;
            take_while(is_digit);
            tok_.text = src_.substr(d, i_ - d);
            if (tok_.text.empty()) lex_error("expected digits after '%' (a value id such as %3)");
            auto [p, ec] = std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), tok_.ival);
            if (ec != std::errc() || tok_.ival > std::numeric_limits<ValueId>::max())
                fail_at(tok_.pos, "value id %" + std::string(tok_.text) + " is out of range");
            tok_.kind = Token::Id;
        } else if (c == '?') {
            bump();
            std::size_t d = i_;
            take_while(is_ident_char);
            tok_.text = src_.substr(d, i_ - d);
            if (tok_.text.empty()) lex_error("expected a symbol name after '?' (letters, digits and '_')");
            tok_.kind = Token::Sym;
        } else if (c == '"') {
            lex_string();
        } else if (c == '0' && (peek_char(1) == 'x' || peek_char(1) == 'X')) {
            bump();
            bump();
            std::size_t d = i_;
            take_while([](char h) { return std::isxdigit(static_cast<unsigned char>(h)) != 0; });
            tok_.kind = Token::Hex;
            tok_.text = src_.substr(d, i_ - d);
        } else if (is_digit(c) || (c == '-' && is_digit(peek_char(1)))) {
            lex_number();
        } else if (c == '-' && src_.substr(i_, 4) == "-inf" && !is_ident_char(peek_char(4))) {
            for (int k = 0; k < 4; ++k) bump();
            tok_.kind = Token::Float;
            tok_.text = src_.substr(start, 4);
            tok_.fval = -std::numeric_limits<double>::infinity();
        } else if (std::strchr("{}()[]<>,=:*+", c) != nullptr || (c == '-' && peek_char(1) == '?')) {
            bump();
            tok_.kind = Token::Punct;
            tok_.text = src_.substr(start, 1);
        } else {
            char shown[8];
            auto u = static_cast<unsigned char>(c);
            std::snprintf(shown, sizeof shown, std::isprint(u) ? "%c" : "\\x%02x", u);
            lex_error("unexpected character '" + std::string(shown) + "'");
        }
    }

    void lex_number() {
        std::size_t start = i_;
        bool is_float = false;
        if (src_[i_] == '-') bump();
        while (is_digit(peek_char())) bump();
        if (peek_char() == '.') {
            is_float = true;
            bump();
            while (is_digit(peek_char())) bump();
        }
        if (peek_char() == 'e' || peek_char() == 'E') {
            std::size_t k = 1;
            if (peek_char(1) == '+' || peek_char(1) == '-') k = 2;
            if (is_digit(peek_char(k))) {
                is_float = true;
                for (std::size_t j = 0; j < k; ++j) bump();
                while (is_digit(peek_char())) bump();
            }
        }
        tok_.text = src_.substr(start, i_ - start);
        const char* b = tok_.text.data();
        const char* e = b + tok_.text.size();
        if (is_float) {
            tok_.kind = Token::Float;
            auto [p, ec] = std::from_chars(b, e, tok_.fval);
            if (ec != std::errc() || p != e) fail_at(tok_.pos, "float " + std::string(tok_.text) + " is out of range");
        } else {
            tok_.kind = Token::Int;
            auto [p, ec] = std::from_chars(b, e, tok_.ival);
            if (ec != std::errc() || p != e)
                fail_at(tok_.pos, "integer " + std::string(tok_.text) + " does not fit in 64 bits");
        }
    }

    void lex_string() {
        std::size_t start = i_;
        bump();
        std::string out;
        for (;;) {
            if (i_ >= src_.size() || src_[i_] == '\n')
                fail_at(tok_.pos, "unterminated string (a string ends at '\"' on its line)");
            char c = src_[i_];
            if (c == '"') {
                bump();
                break;
            }
            if (c != '\\') {
                out += c;
                bump();
                continue;
            }
            bump();
            char e = peek_char();
            if (e == '"' || e == '\\') out += e;
            else if (e == 'n') out += '\n';
            else if (e == 't') out += '\t';
            else if (e == 'x' && std::isxdigit(static_cast<unsigned char>(peek_char(1))) &&
                     std::isxdigit(static_cast<unsigned char>(peek_char(2)))) {
                out += static_cast<char>(std::stoi(std::string(src_.substr(i_ + 1, 2)), nullptr, 16));
                bump();
                bump();
            } else {
                lex_error("unknown escape in a string (expected \\\" \\\\ \\n \\t or \\xNN)");
            }
            bump();
        }
        tok_.kind = Token::Str;
        tok_.text = src_.substr(start, i_ - start);
        tok_.sval = std::move(out);
    }

    // ---- parser ----
    void expect_punct(char c, const std::string& where) {
        if (!tok_.is(c)) error(std::string("expected '") + c + "' " + where);
        advance();
    }
    void expect_word(std::string_view w, const std::string& where) {
        if (!tok_.is_word(w)) error("expected '" + std::string(w) + "' " + where);
        advance();
    }

    ValueId parse_output(const Graph& g) {
        if (tok_.ival >= static_cast<std::int64_t>(g.nodes.size()))
            fail_at(tok_.pos, "output %" + std::to_string(tok_.ival) + " is not a node (the graph has " +
                                  std::to_string(g.nodes.size()) + ")");
        auto id = static_cast<ValueId>(tok_.ival);
        advance();
        return id;
    }

    void parse_node(Graph& g) {
        auto id = static_cast<ValueId>(g.nodes.size());
        if (tok_.ival != id)
            fail_at(tok_.pos, "node ids must count up from %0: expected %" + std::to_string(id) + ", got %" +
                                  std::to_string(tok_.ival));
        advance();
        expect_punct('=', "after the node id");
        if (tok_.kind != Token::Ident) error("expected an op name after '='");
        std::optional<Op> op = op_from_name(tok_.text);
        if (!op) fail_at(tok_.pos, "unknown op '" + std::string(tok_.text) + "'");
        Node n;
        n.op = *op;
        advance();
        expect_punct('(', "after the op name (a source op has empty parentheses)");
        if (!tok_.is(')')) {
            for (;;) {
                if (tok_.kind != Token::Id) error("expected an operand '%N'");
                if (tok_.ival >= id)
                    fail_at(tok_.pos, "operand %" + std::to_string(tok_.ival) + " is not defined before %" +
                                          std::to_string(id) + " (operands must refer to earlier nodes)");
                n.inputs.push_back(static_cast<ValueId>(tok_.ival));
                advance();
                if (!tok_.is(',')) break;
                advance();
            }
        }
        expect_punct(')', "after the operands");
        Token data;  // a constant's data token
        bool is_const = n.op == Op::constant;
        if (tok_.is('{')) {
            advance();
            if (is_const) data = parse_data();
            bool first = !is_const;
            while (first || tok_.is(',')) {
                if (!first) advance();
                first = false;
                parse_attr(n.attrs);
            }
            expect_punct('}', "after the attributes");
        } else if (is_const) {
            error("expected '{data=0x...}' after a constant's '()'");
        }
        if (!tok_.is(':')) error("expected ':' before the type");
        advance();
        Pos type_pos = tok_.pos;
        n.type = parse_type();
        if (is_const) n.value = make_constant(data, n.type, type_pos);
        g.nodes.push_back(std::move(n));
    }

    Token parse_data() {
        if (!tok_.is_word("data")) error("expected 'data=0x...' as a constant's first attribute");
        advance();
        expect_punct('=', "after 'data'");
        if (tok_.is('<')) {
            Pos p = tok_.pos;
            advance();
            if (tok_.is_word("elided"))
                fail_at(p, "constant data was elided when printed; "
                           "print with max_constant_elements = -1 to round-trip");
            error("expected constant data '0x...'");
        }
        if (tok_.kind != Token::Hex) error("expected constant data '0x...'");
        Token t = tok_;
        advance();
        return t;
    }

    Tensor make_constant(const Token& data, const TensorType& type, Pos type_pos) const {
        if (!type.is_static()) fail_at(type_pos, "a constant's type must be static, got " + type.to_string());
        Shape shape = type.static_shape();
        for (std::int64_t d : shape)
            if (d < 0) fail_at(type_pos, "a constant's dims must be >= 0, got " + type.to_string());
        const bool overflow = !support::bytes_fit(shape, dtype_size(type.dtype));
        const std::size_t bytes =
            overflow ? 0 : static_cast<std::size_t>(support::checked_bytes(shape, dtype_size(type.dtype), "constant"));
        if (data.text.size() % 2 != 0) fail_at(data.pos, "constant data has an odd number of hex digits");
        if (overflow || bytes != data.text.size() / 2)
            fail_at(data.pos, "constant data has " + std::to_string(data.text.size() / 2) + " bytes, but " +
                                  type.to_string() + " needs " + (overflow ? "more than 2^63-1" : std::to_string(bytes)));
        Tensor t = Tensor::empty(shape, type.dtype);
        auto* p = static_cast<unsigned char*>(t.data());
        auto nibble = [](char h) {
            int v = is_digit(h) ? h - '0' : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10;
            return static_cast<unsigned>(v);
        };
        for (std::size_t i = 0; i < bytes; ++i) {
            p[i] = static_cast<unsigned char>(nibble(data.text[2 * i]) << 4 | nibble(data.text[2 * i + 1]));
            // A boolean is the byte 0 or 1: any other is no value (reading it as bool is undefined).
            if (type.dtype == DType::boolean && p[i] > 1)
                fail_at(data.pos, "boolean constant data must hold the bytes 00 and 01, got " +
                                      std::string(data.text.substr(2 * i, 2)) + " at byte " + std::to_string(i));
        }
        return t;
    }

    void parse_attr(Attrs& attrs) {
        if (tok_.kind != Token::Ident) error("expected an attribute name");
        std::string name(tok_.text);
        Pos p = tok_.pos;
        advance();
        expect_punct('=', "after the attribute name '" + name + "'");
        AttrValue v = parse_value();
        if (attrs.has(name)) fail_at(p, "duplicate attribute '" + name + "'");
        attrs.set(std::move(name), std::move(v));
    }

    AttrValue parse_value() {
        Token t = tok_;
        switch (t.kind) {
        case Token::Int: advance(); return t.ival;
        case Token::Float: advance(); return t.fval;
        case Token::Str: advance(); return std::move(t.sval);
        case Token::Ident:
            if (t.text == "inf" || t.text == "nan") {
                advance();
                if (t.text == "inf") return std::numeric_limits<double>::infinity();
                return std::numeric_limits<double>::quiet_NaN();
            }
            if (auto dt = dtype_from_name(t.text)) {
                advance();
                return *dt;
            }
            error("expected an attribute value (an int, a float, [ints], <dims>, a dtype such as f32 or a \"string\")");
        case Token::Punct:
            if (t.is('[')) {
                advance();
                std::vector<std::int64_t> v;
                if (!tok_.is(']')) {
                    for (;;) {
                        if (tok_.kind != Token::Int) error("expected an integer in the list");
                        v.push_back(tok_.ival);
                        advance();
                        if (!tok_.is(',')) break;
                        advance();
                    }
                }
                expect_punct(']', "at the end of the integer list");
                return v;
            }
            if (t.is('<')) {
                advance();
                std::vector<Dim> v = parse_dims('>');
                return v;
            }
            break;
        default: break;
        }
        error("expected an attribute value (an int, a float, [ints], <dims>, a dtype such as f32 or a \"string\")");
    }

    TensorType parse_type() {
        if (tok_.kind != Token::Ident) error("expected a type such as f32[?batch,784]");
        std::optional<DType> dt = dtype_from_name(tok_.text);
        if (!dt)
            fail_at(tok_.pos, "unknown dtype '" + std::string(tok_.text) +
                                  "' (expected f32, f64, f16, bf16, i8, u8, i32, i64 or bool)");
        advance();
        expect_punct('[', "after the dtype (a scalar is written f32[])");
        TensorType t{*dt, parse_dims(']')};
        return t;
    }

    // dims up to and including `close`; the opening bracket has been read.
    std::vector<Dim> parse_dims(char close) {
        std::vector<Dim> dims;
        if (!tok_.is(close)) {
            for (;;) {
                dims.push_back(parse_dim());
                if (!tok_.is(',')) break;
                advance();
            }
        }
        if (!tok_.is(close)) error(std::string("expected ',' or '") + close + "' after a dim");
        advance();
        return dims;
    }

    // A dim: a sum of terms, each a product of integers and ?symbols ("?past+?seq", "4*?B-1").
    Dim parse_dim() {
        Dim r;
        for (;;) {
            const bool negative = tok_.is('-');  // only before a symbol: "-3" lexes as a number
            if (negative) advance();
            Dim t = parse_term();
            r = negative ? r - t : r + t;
            if (tok_.is('+')) advance();
            else if (!tok_.is('-') && !(tok_.kind == Token::Int && tok_.text.starts_with("-"))) return r;
        }
    }

    Dim parse_term() {
        Dim d(1);
        for (;;) {
            if (tok_.kind == Token::Int) d = d * Dim(tok_.ival);
            else if (tok_.kind == Token::Sym) d = d * Dim::symbol(std::string(tok_.text));
            else error("expected a dim (integers and ?symbols joined by '*', '+' and '-')");
            advance();
            if (!tok_.is('*')) return d;
            advance();
        }
    }

    std::string_view src_;
    std::size_t i_ = 0;
    Pos pos_;
    Token tok_;
};

}  // namespace

std::shared_ptr<const Graph> parse(const std::string& text) { return Parser(text).run(); }

}  // namespace kiln::ir
