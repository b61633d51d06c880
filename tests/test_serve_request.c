/*
 * test_serve_request.c — the pieces of `backplane serve` that need no
 * socket: request bodies to parameters (every invalid field is a 400 that
 * names it), the error object, UTF-8-safe JSON strings, the stop-string
 * matcher that holds back text that could still become a stop string, and
 * the framing of server-sent events.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "request.h"
#include "server.h"
#include "suite_main.h"
#include "text.h"

static bool parse(const char *body, enum serve_kind kind, struct serve_params *p, struct serve_error *e)
{
    return serve_params_parse(body, strlen(body), kind, p, e);
}

START_TEST(test_serve_request_reads_every_field)
{
    struct serve_params p;
    struct serve_error e;
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"text\",\"text\":\"b\"}]}],"
                       "\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":5,\"min_p\":0.1,"
                       "\"seed\":9,\"repeat_penalty\":1.1,\"stop\":[\"x\",\"yz\"],\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":3,"
                       "\"user\":\"u\"}";
    ck_assert_msg(parse(body, SERVE_CHAT, &p, &e), "%s", e.message);
    ck_assert_str_eq(p.model, "m");
    ck_assert_uint_eq(p.n_msgs, 2);
    ck_assert_str_eq(p.msgs[0].role, "system");
    ck_assert_str_eq(p.msgs[1].content, "ab");
    ck_assert_int_eq(p.max_tokens, 7);
    ck_assert_float_eq_tol(p.sp.temp, 0.5f, 1e-6f);
    ck_assert_float_eq_tol(p.sp.top_p, 0.9f, 1e-6f);
    ck_assert_int_eq(p.sp.top_k, 5);
    ck_assert(p.seed_given && p.sp.seed == 9);
    ck_assert_uint_eq(p.n_stop, 2);
    ck_assert_str_eq(p.stop[1], "yz");
    ck_assert(p.stream && p.include_usage && p.logprobs);
    ck_assert_int_eq(p.top_logprobs, 3);
    serve_params_free(&p);
}
END_TEST

START_TEST(test_serve_request_defaults_follow_openai)
{
    struct serve_params p;
    struct serve_error e;
    ck_assert(parse("{\"prompt\":\"hi\",\"stop\":\"END\"}", SERVE_COMPLETION, &p, &e));
    ck_assert_int_eq(p.max_tokens, -1);
    ck_assert_float_eq_tol(p.sp.temp, 1.0f, 1e-6f);
    ck_assert_float_eq_tol(p.sp.top_p, 1.0f, 1e-6f);
    ck_assert(!p.stream && !p.seed_given && !p.logprobs);
    ck_assert_uint_eq(p.n_stop, 1);
    ck_assert_str_eq(p.stop[0], "END");
    ck_assert_str_eq(p.prompt, "hi");
    serve_params_free(&p);
    ck_assert(parse("{\"prompt\":[1,2,3],\"logprobs\":2}", SERVE_COMPLETION, &p, &e));
    ck_assert_uint_eq(p.n_prompt_ids, 3);
    ck_assert(p.logprobs);
    ck_assert_int_eq(p.top_logprobs, 2);
    serve_params_free(&p);
}
END_TEST

/* Each invalid body, and the param its 400 must name ("" for none). */
static const struct {
    enum serve_kind kind;
    const char *body, *param;
} bad[] = {
    {SERVE_CHAT, "{\"messages\":[", ""},
    {SERVE_CHAT, "", ""},
    {SERVE_CHAT, "[]", ""},
    {SERVE_CHAT, "{}", "messages"},
    {SERVE_CHAT, "{\"messages\":[]}", "messages"},
    {SERVE_CHAT, "{\"messages\":[1]}", "messages[0]"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "messages[0].role"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":-3}", "max_tokens"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":2.5}", "max_tokens"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"max_completion_tokens\":\"9\"}", "max_completion_tokens"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"temperature\":-0.1}", "temperature"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"top_p\":\"1\"}", "top_p"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"min_p\":2}", "min_p"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"top_k\":1.5}", "top_k"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"repeat_penalty\":0}", "repeat_penalty"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"seed\":\"7\"}", "seed"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"stop\":[\"\"]}", "stop"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"stop\":[1]}", "stop"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"stream\":1}", "stream"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":\"y\"}}",
     "stream_options.include_usage"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"n\":3}", "n"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":21}", "logprobs"},
    {SERVE_COMPLETION, "{\"prompt\":\"x\",\"model\":5}", "model"},
    {SERVE_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt"},
    {SERVE_COMPLETION, "{\"prompt\":[1,-2]}", "prompt"},
    {SERVE_COMPLETION, "{\"prompt\":{}}", "prompt"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "top_logprobs"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", "logprobs"},
    {SERVE_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"frequency_penalty\":9}", "frequency_penalty"},
};

START_TEST(test_serve_request_refuses_each_invalid_field_by_name)
{
    struct serve_params p;
    struct serve_error e;
    ck_assert(!parse(bad[_i].body, bad[_i].kind, &p, &e));
    serve_params_free(&p);
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.param, bad[_i].param);
    ck_assert_msg(strlen(e.message) > 10, "no sentence for %s", bad[_i].body);
    if (bad[_i].param[0]) ck_assert_msg(strstr(e.message, bad[_i].param) || strstr(bad[_i].param, "messages"),
                                        "'%s' does not name %s", e.message, bad[_i].param);
}
END_TEST

START_TEST(test_serve_error_object_has_openai_shape)
{
    struct serve_error e;
    serve_fail(&e, 400, "max_tokens", "'max_tokens' is %d.", -1);
    char *s = serve_error_json(&e);
    json_t *j = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *inner = json_object_get(j, "error");
    ck_assert_str_eq(json_string_value(json_object_get(inner, "message")), "'max_tokens' is -1.");
    ck_assert_str_eq(json_string_value(json_object_get(inner, "type")), "invalid_request_error");
    ck_assert_str_eq(json_string_value(json_object_get(inner, "param")), "max_tokens");
    ck_assert_int_eq(json_integer_value(json_object_get(inner, "code")), 400);
    json_decref(j);
    free(s);
    serve_fail(&e, 404, "model", "no such model.");
    s = serve_error_json(&e);
    ck_assert_ptr_nonnull(strstr(s, "\"code\":\"model_not_found\""));
    free(s);
}
END_TEST

START_TEST(test_serve_json_text_replaces_invalid_utf8)
{
    json_t *j = serve_json_text("a\xFF" "b\xE2\x82", 5);
    ck_assert_str_eq(json_string_value(j), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    json_decref(j);
    j = serve_json_text("caf\xC3\xA9", 5);
    ck_assert_str_eq(json_string_value(j), "caf\xC3\xA9");
    json_decref(j);
}
END_TEST

/* Pushes each piece and returns what was taken after it, joined with '|'. */
static void run_stop(char *const *stops, size_t n, const char *const *pieces, char *out, size_t cap, bool *stopped)
{
    struct serve_stop s;
    serve_stop_init(&s, stops, n);
    out[0] = '\0';
    for (size_t i = 0; pieces[i]; i++) {
        ck_assert(serve_stop_push(&s, pieces[i], strlen(pieces[i])));
        const char *t;
        size_t len;
        serve_stop_take(&s, !pieces[i + 1] || s.stopped, &t, &len);
        strncat(out, t, len);
        strncat(out, "|", cap - strlen(out) - 1);
        if (s.stopped) break;
    }
    *stopped = s.stopped;
    serve_stop_free(&s);
}

START_TEST(test_serve_stop_holds_back_what_could_become_a_stop)
{
    char *stops[] = {"END", "\xC3\xA9!"};
    char out[256];
    bool stopped;
    /* "E" and "EN" could start END: held until they cannot. */
    run_stop(stops, 2, (const char *const[]){"Hello E", "N", "x and more", NULL}, out, sizeof out, &stopped);
    ck_assert_str_eq(out, "Hello ||ENx and more|");
    ck_assert(!stopped);
    /* A stop split over three pieces ends the text before it. */
    run_stop(stops, 2, (const char *const[]){"one E", "N", "D two", NULL}, out, sizeof out, &stopped);
    ck_assert_str_eq(out, "one |||");
    ck_assert(stopped);
    /* A held tail is whole UTF-8: "é" could start "é!". */
    run_stop(stops, 2, (const char *const[]){"caf\xC3\xA9", " ok", NULL}, out, sizeof out, &stopped);
    ck_assert_str_eq(out, "caf|\xC3\xA9 ok|");
    ck_assert(!stopped);
    /* The earliest of several stops wins. */
    char *two[] = {"cd", "b"};
    run_stop(two, 2, (const char *const[]){"abcd", NULL}, out, sizeof out, &stopped);
    ck_assert_str_eq(out, "a|");
    ck_assert(stopped);
}
END_TEST

START_TEST(test_serve_sse_frames_events_and_comments)
{
    struct serve_buf b = {0};
    ck_assert(serve_sse_comment(&b, "keep-alive"));
    ck_assert(serve_sse_data(&b, "{\"a\":1}"));
    ck_assert(serve_sse_data(&b, "[DONE]"));
    ck_assert_str_eq(b.data, ": keep-alive\n\ndata: {\"a\":1}\n\ndata: [DONE]\n\n");
    free(b.data);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve_request");
    TCase *tc = tcase_create("serve_request");
    tcase_add_test(tc, test_serve_request_reads_every_field);
    tcase_add_test(tc, test_serve_request_defaults_follow_openai);
    tcase_add_loop_test(tc, test_serve_request_refuses_each_invalid_field_by_name, 0, sizeof bad / sizeof bad[0]);
    tcase_add_test(tc, test_serve_error_object_has_openai_shape);
    tcase_add_test(tc, test_serve_json_text_replaces_invalid_utf8);
    tcase_add_test(tc, test_serve_stop_holds_back_what_could_become_a_stop);
    tcase_add_test(tc, test_serve_sse_frames_events_and_comments);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
