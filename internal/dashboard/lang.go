package dashboard

import (
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"
)

// Lang is a language of the dashboard. Many of our users run Hotmart,
// Mercado Pago, Asaas and WhatsApp operations in Brazil: every string is in
// English and Brazilian Portuguese (a test checks that no key lacks one).
type Lang struct {
	Code string
	Name string
	msgs map[string]string
}

// T translates key, formatting args into it when it has verbs.
func (l Lang) T(key string, args ...any) string {
	s, ok := l.msgs[key]
	if !ok {
		s, ok = catalog["en"][key]
		if !ok {
			return key
		}
	}
	if len(args) > 0 {
		return fmt.Sprintf(s, args...)
	}
	return s
}

// Num writes an integer with the language's digit grouping.
func (l Lang) Num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	sep := ","
	if l.Code == "pt-BR" {
		sep = "."
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// HTML is T for strings that hold markup of our own.
func (l Lang) HTML(key string) template.HTML { return template.HTML(l.T(key)) }

// Langs lists the languages, for the switch.
func Langs() []Lang {
	return []Lang{pick("en"), pick("pt-BR")}
}

func pick(code string) Lang {
	switch strings.ToLower(code) {
	case "pt-br", "pt", "pt_br":
		return Lang{Code: "pt-BR", Name: "Português (Brasil)", msgs: catalog["pt-BR"]}
	}
	return Lang{Code: "en", Name: "English", msgs: catalog["en"]}
}

// fromAcceptLanguage picks the best of our languages for an
// Accept-Language header ("pt-BR,pt;q=0.9,en;q=0.8").
func fromAcceptLanguage(h string) Lang {
	type choice struct {
		tag string
		q   float64
	}
	var cs []choice
	for _, part := range strings.Split(h, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		if tag != "" {
			cs = append(cs, choice{strings.ToLower(tag), q})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].q > cs[j].q })
	for _, c := range cs {
		switch {
		case c.q <= 0:
		case strings.HasPrefix(c.tag, "pt"):
			return pick("pt-BR")
		case strings.HasPrefix(c.tag, "en"):
			return pick("en")
		}
	}
	return pick("en")
}

var catalog = map[string]map[string]string{
	"en": {
		"title":                             "oncehook",
		"nav.overview":                      "Overview",
		"nav.events":                        "Events",
		"nav.dead":                          "Dead letters",
		"nav.destinations":                  "Destinations",
		"nav.effects":                       "Effects",
		"nav.audit":                         "Audit log",
		"logout":                            "Log out",
		"signed_in_as":                      "Signed in as %s",
		"login.title":                       "Sign in",
		"event.copies_two":                  "arrived twice (1 duplicate, answered 200 and not delivered again)",
		"event.copies":                      "Copies",
		"event.copies_n":                    "arrived %d times (%d duplicates, each answered 200 and not delivered again)",
		"event.copies_one":                  "arrived once",
		"event.last_copy":                   "last duplicate at",
		"baseline.none":                     "not yet: it needs 7 days of history for this hour",
		"legend.received":                   "received per hour",
		"legend.duplicates":                 "of them duplicates",
		"legend.rate":                       "duplicate rate (right axis, % per hour)",
		"legend.baseline":                   "baseline: the same hour over 7 days",
		"chart.now":                         "now",
		"unknown.title":                     "Unknown sources",
		"unknown.count":                     "%d requests in the last 24 hours asked for a source the config does not have (answered 404, nothing stored).",
		"unknown.recent":                    "Names asked for lately, on this replica: a provider pointed at a misspelt URL, an old source, or a scanner.",
		"outcome.delivered":                 "delivered",
		"outcome.retry":                     "retry",
		"outcome.dead":                      "dead",
		"outcome.released":                  "released",
		"outcome.unknown":                   "unknown",
		"reason.unauthorized":               "bad signature",
		"reason.malformed":                  "malformed body",
		"reason.too_large":                  "too large",
		"reason.unreadable":                 "unreadable body",
		"reason.slow_body":                  "body too slow",
		"reason.method_not_allowed":         "wrong method",
		"reason.missing_key":                "no event key",
		"reason.unknown_source":             "unknown source",
		"reason.not_found":                  "unknown path",
		"reason.overloaded":                 "overloaded (503)",
		"reason.unavailable":                "store unavailable (503)",
		"reason.store_rejected":             "refused by the store",
		"reason.discarded_unauthorized":     "bad signature, discarded (200)",
		"action.replay":                     "replay",
		"action.retry":                      "retry dead letters",
		"action.purge":                      "purge dead letters",
		"action.pause":                      "pause",
		"action.resume":                     "resume",
		"action.effect_reset":               "effect reset",
		"target.event":                      "event",
		"target.destination":                "destination",
		"target.effect":                     "effect",
		"target.all_events":                 "all events",
		"target.all_dead_letters":           "all dead letters",
		"doctor.key_per_delivery.fields":    "%d of %d recent events are the same body apart from %s, under another key: the key seems to hold a per-delivery value, so every resend looks new and gets through.",
		"doctor.key_per_delivery.identical": "%d of %d recent events have identical bodies under another key (the key comes from outside the body, a header): it seems to hold a per-delivery value, so every resend looks new and gets through.",
		"doctor.key_too_coarse.message":     "%d of %d recent duplicates differ from the stored event in %s: the key seems too coarse, so real changes are dropped as duplicates.",
		"dead.purge_of":                     "Purge the dead letters of",
		"dead.retry_of":                     "Retry the dead letters of",
		"readonly.note":                     "Your token is read-only: you can look, not change anything.",
		"login.help":                        "Paste an API token from api.tokens in your configuration.",
		"login.help_demo":                   "Paste the demo's API token: oncehook serve printed it in the console where it runs (the line that starts with \"api:\").",
		"login.token":                       "API token",
		"login.submit":                      "Sign in",
		"login.failed":                      "That token is not one of api.tokens.",
		"login.link_used":                   "This login link was already used or has expired. Sign in with a token.",
		"overview.title":                    "Overview",
		"overview.none":                     "No sources are configured.",
		"overview.last_hour":                "This hour",
		"overview.last_24h":                 "Last 24 hours",
		"overview.7d":                       "Last 7 days",
		"received":                          "Received",
		"accepted":                          "Accepted",
		"duplicates":                        "Duplicates",
		"duplicate_rate":                    "Duplicate rate",
		"keyless":                           "Keyless",
		"rejected":                          "Rejected",
		"baseline":                          "Baseline (same hour, 7 days)",
		"above_baseline":                    "Above baseline",
		"alerting":                          "Alerting",
		"rejections_by_reason":              "Rejections by reason",
		"no_rejections":                     "No rejections.",
		"chart.legend":                      "Bars: received and duplicates per hour. Line: duplicate rate. Dashed: baseline.",
		"source":                            "Source",
		"preset":                            "Preset",
		"window":                            "Window",
		"destinations":                      "Destinations",
		"check_keys":                        "Check keys",
		"doctor.title":                      "Key doctor",
		"doctor.ok":                         "No finding: keys look right for the events sampled.",
		"doctor.sampled":                    "%d recent events and %d recent duplicates sampled.",
		"doctor.fields":                     "Fields",
		"doctor.keys":                       "Example keys",
		"doctor.key_per_delivery":           "The key seems to hold a per-delivery value",
		"doctor.key_too_coarse":             "The key seems too coarse",
		"events.title":                      "Events",
		"events.none":                       "No events match.",
		"events.filter":                     "Filter",
		"events.any":                        "any",
		"events.key_prefix":                 "Key prefix",
		"events.next":                       "Older events",
		"events.replay_all":                 "Replay every event this filter selects",
		"events.replay_count":               "Count first (dry run)",
		"state":                             "State",
		"state.pending":                     "pending",
		"state.delivered":                   "delivered",
		"state.dead":                        "dead",
		"state.stored":                      "stored",
		"state.failed":                      "failed",
		"state.done":                        "done",
		"state.expired":                     "expired",
		"state.stale":                       "stale",
		"key":                               "Key",
		"received_at":                       "Received",
		"expires_at":                        "Dedup window ends",
		"size":                              "Size",
		"deliveries":                        "Deliveries",
		"event.title":                       "Event %d",
		"event.payload":                     "Payload",
		"event.headers":                     "Forwarded headers",
		"event.no_headers":                  "None.",
		"event.replay":                      "Replay",
		"event.replay_help":                 "Deliver this event again to every destination, with the same Idempotency-Key.",
		"event.no_deliveries":               "This event has no destination: it is stored for dedup only.",
		"destination":                       "Destination",
		"attempts":                          "Attempts",
		"attempt":                           "Attempt",
		"started":                           "Started",
		"duration":                          "Duration",
		"status":                            "Status",
		"outcome":                           "Outcome",
		"error":                             "Error",
		"response":                          "Response",
		"next_attempt":                      "Next attempt",
		"no_attempts":                       "No attempt yet.",
		"dead.title":                        "Dead letters",
		"dead.none":                         "No dead letters.",
		"dead.retry":                        "Retry",
		"dead.purge":                        "Purge",
		"dead.purge_confirm":                "I understand purged dead letters are gone for good",
		"dead.all_destinations":             "all destinations",
		"last_status":                       "Last status",
		"died_at":                           "Died",
		"dest.title":                        "Destinations",
		"dest.pending":                      "Pending",
		"dest.leased":                       "In flight",
		"dest.oldest":                       "Oldest pending",
		"dest.dead":                         "Dead letters",
		"dest.24h":                          "Last 24 hours",
		"dest.latency":                      "Avg latency",
		"dest.pause":                        "Pause",
		"dest.resume":                       "Resume",
		"dest.paused":                       "Paused",
		"dest.paused_since":                 "since %s",
		"dest.active":                       "Active",
		"dest.help":                         "Pause holds deliveries and never drops them; intake keeps accepting. Resume drains what was held.",
		"effects.title":                     "Effects ledger",
		"effects.help":                      "Side effects in progress, those left halfway (pending, their lease expired: the next claim takes them over) and those failed for good. Reset reopens a failed one for its next claim.",
		"effects.held":                      "Pending, held by an owner now",
		"effects.stale":                     "Left halfway",
		"effects.failed":                    "Failed",
		"effects.none":                      "None.",
		"effects.reset":                     "Reset",
		"effects.lease_expires":             "Lease expires",
		"effects.updated":                   "Updated",
		"audit.title":                       "Audit log",
		"audit.none":                        "No change has been made yet.",
		"audit.at":                          "When",
		"audit.actor":                       "Who",
		"audit.action":                      "Action",
		"audit.target":                      "On",
		"audit.count":                       "Count",
		"done.replay":                       "Replayed: %s deliveries requeued.",
		"done.replay_dry":                   "Dry run: %s deliveries would be requeued.",
		"done.retry":                        "Retried: %s dead letters requeued.",
		"done.purge":                        "Purged: %s dead letters.",
		"done.pause":                        "Paused.",
		"done.resume":                       "Resumed: held deliveries are being sent.",
		"done.reset":                        "Reset: the effect is open to its next claim.",
		"error.title":                       "Error %d",
		"error.not_found":                   "Not found.",
		"error.unauthorized":                "Sign in first.",
		"error.csrf":                        "This form has expired (or did not come from this page). Go back, reload and try again.",
		"error.read_only":                   "Your token is read-only.",
		"error.bad_request":                 "That request is not valid.",
		"error.unavailable":                 "The store is unavailable; try again shortly.",
		"error.internal":                    "Something went wrong; the gateway's log says what.",
		"live":                              "Live",
		"more":                              "More",
	},
	"pt-BR": {
		"title":                             "oncehook",
		"nav.overview":                      "Visão geral",
		"nav.events":                        "Eventos",
		"nav.dead":                          "Mensagens mortas",
		"nav.destinations":                  "Destinos",
		"nav.effects":                       "Efeitos",
		"nav.audit":                         "Auditoria",
		"logout":                            "Sair",
		"signed_in_as":                      "Conectado como %s",
		"login.title":                       "Entrar",
		"event.copies_two":                  "chegou duas vezes (1 duplicado, respondido com 200 e não entregue de novo)",
		"event.copies":                      "Cópias",
		"event.copies_n":                    "chegou %d vezes (%d duplicados, cada um respondido com 200 e não entregue de novo)",
		"event.copies_one":                  "chegou uma vez",
		"event.last_copy":                   "último duplicado em",
		"baseline.none":                     "ainda não: precisa de 7 dias de histórico desta hora",
		"legend.received":                   "recebidos por hora",
		"legend.duplicates":                 "dos quais duplicados",
		"legend.rate":                       "taxa de duplicados (eixo direito, % por hora)",
		"legend.baseline":                   "referência: a mesma hora nos últimos 7 dias",
		"chart.now":                         "agora",
		"unknown.title":                     "Origens desconhecidas",
		"unknown.count":                     "%d requisições nas últimas 24 horas pediram uma origem que a configuração não tem (respondidas com 404, nada armazenado).",
		"unknown.recent":                    "Nomes pedidos recentemente, nesta réplica: um provedor apontado para uma URL com erro, uma origem antiga ou um scanner.",
		"outcome.delivered":                 "entregue",
		"outcome.retry":                     "nova tentativa",
		"outcome.dead":                      "desistiu",
		"outcome.released":                  "liberada",
		"outcome.unknown":                   "desconhecido",
		"reason.unauthorized":               "assinatura inválida",
		"reason.malformed":                  "corpo malformado",
		"reason.too_large":                  "grande demais",
		"reason.unreadable":                 "corpo ilegível",
		"reason.slow_body":                  "corpo lento demais",
		"reason.method_not_allowed":         "método errado",
		"reason.missing_key":                "sem chave de evento",
		"reason.unknown_source":             "origem desconhecida",
		"reason.not_found":                  "caminho desconhecido",
		"reason.overloaded":                 "sobrecarregado (503)",
		"reason.unavailable":                "armazenamento indisponível (503)",
		"reason.store_rejected":             "recusado pelo armazenamento",
		"reason.discarded_unauthorized":     "assinatura inválida, descartado (200)",
		"action.replay":                     "reenvio",
		"action.retry":                      "reenvio de mensagens mortas",
		"action.purge":                      "remoção de mensagens mortas",
		"action.pause":                      "pausa",
		"action.resume":                     "retomada",
		"action.effect_reset":               "reabertura de efeito",
		"target.event":                      "evento",
		"target.destination":                "destino",
		"target.effect":                     "efeito",
		"target.all_events":                 "todos os eventos",
		"target.all_dead_letters":           "todas as mensagens mortas",
		"doctor.key_per_delivery.fields":    "%d de %d eventos recentes têm o mesmo corpo, exceto %s, com outra chave: a chave parece conter um valor por entrega, então cada reenvio parece novo e passa.",
		"doctor.key_per_delivery.identical": "%d de %d eventos recentes têm corpos idênticos com outra chave (a chave vem de fora do corpo, de um cabeçalho): parece conter um valor por entrega, então cada reenvio parece novo e passa.",
		"doctor.key_too_coarse.message":     "%d de %d duplicados recentes diferem do evento armazenado em %s: a chave parece grossa demais, então mudanças reais são descartadas como duplicadas.",
		"dead.purge_of":                     "Apagar as mensagens mortas de",
		"dead.retry_of":                     "Reenviar as mensagens mortas de",
		"readonly.note":                     "Seu token é somente leitura: você pode ver, mas não alterar nada.",
		"login.help":                        "Cole um token de API de api.tokens da sua configuração.",
		"login.help_demo":                   "Cole o token de API da demonstração: o oncehook serve o mostrou no console onde está rodando (a linha que começa com \"api:\").",
		"login.token":                       "Token de API",
		"login.submit":                      "Entrar",
		"login.failed":                      "Esse token não está em api.tokens.",
		"login.link_used":                   "Este link de acesso já foi usado ou expirou. Entre com um token.",
		"overview.title":                    "Visão geral",
		"overview.none":                     "Nenhuma origem configurada.",
		"overview.last_hour":                "Nesta hora",
		"overview.last_24h":                 "Últimas 24 horas",
		"overview.7d":                       "Últimos 7 dias",
		"received":                          "Recebidos",
		"accepted":                          "Aceitos",
		"duplicates":                        "Duplicados",
		"duplicate_rate":                    "Taxa de duplicados",
		"keyless":                           "Sem chave",
		"rejected":                          "Rejeitados",
		"baseline":                          "Referência (mesma hora, 7 dias)",
		"above_baseline":                    "Acima da referência",
		"alerting":                          "Em alerta",
		"rejections_by_reason":              "Rejeições por motivo",
		"no_rejections":                     "Nenhuma rejeição.",
		"chart.legend":                      "Barras: recebidos e duplicados por hora. Linha: taxa de duplicados. Tracejado: referência.",
		"source":                            "Origem",
		"preset":                            "Preset",
		"window":                            "Janela",
		"destinations":                      "Destinos",
		"check_keys":                        "Verificar chaves",
		"doctor.title":                      "Diagnóstico de chaves",
		"doctor.ok":                         "Nada encontrado: as chaves parecem corretas nos eventos amostrados.",
		"doctor.sampled":                    "%d eventos recentes e %d duplicados recentes amostrados.",
		"doctor.fields":                     "Campos",
		"doctor.keys":                       "Chaves de exemplo",
		"doctor.key_per_delivery":           "A chave parece conter um valor por entrega",
		"doctor.key_too_coarse":             "A chave parece grossa demais",
		"events.title":                      "Eventos",
		"events.none":                       "Nenhum evento corresponde.",
		"events.filter":                     "Filtrar",
		"events.any":                        "qualquer",
		"events.key_prefix":                 "Prefixo da chave",
		"events.next":                       "Eventos mais antigos",
		"events.replay_all":                 "Reenviar todos os eventos deste filtro",
		"events.replay_count":               "Contar antes (simulação)",
		"state":                             "Estado",
		"state.pending":                     "pendente",
		"state.delivered":                   "entregue",
		"state.dead":                        "morto",
		"state.stored":                      "armazenado",
		"state.failed":                      "falhou",
		"state.done":                        "concluído",
		"state.expired":                     "expirado",
		"state.stale":                       "abandonado",
		"key":                               "Chave",
		"received_at":                       "Recebido",
		"expires_at":                        "Fim da janela de dedup",
		"size":                              "Tamanho",
		"deliveries":                        "Entregas",
		"event.title":                       "Evento %d",
		"event.payload":                     "Conteúdo",
		"event.headers":                     "Cabeçalhos repassados",
		"event.no_headers":                  "Nenhum.",
		"event.replay":                      "Reenviar",
		"event.replay_help":                 "Entregar este evento de novo a cada destino, com a mesma Idempotency-Key.",
		"event.no_deliveries":               "Este evento não tem destino: fica guardado só para dedup.",
		"destination":                       "Destino",
		"attempts":                          "Tentativas",
		"attempt":                           "Tentativa",
		"started":                           "Início",
		"duration":                          "Duração",
		"status":                            "Status",
		"outcome":                           "Resultado",
		"error":                             "Erro",
		"response":                          "Resposta",
		"next_attempt":                      "Próxima tentativa",
		"no_attempts":                       "Nenhuma tentativa ainda.",
		"dead.title":                        "Mensagens mortas",
		"dead.none":                         "Nenhuma mensagem morta.",
		"dead.retry":                        "Tentar de novo",
		"dead.purge":                        "Apagar",
		"dead.purge_confirm":                "Entendo que mensagens apagadas não voltam",
		"dead.all_destinations":             "todos os destinos",
		"last_status":                       "Último status",
		"died_at":                           "Morreu em",
		"dest.title":                        "Destinos",
		"dest.pending":                      "Pendentes",
		"dest.leased":                       "Em andamento",
		"dest.oldest":                       "Pendente mais antiga",
		"dest.dead":                         "Mensagens mortas",
		"dest.24h":                          "Últimas 24 horas",
		"dest.latency":                      "Latência média",
		"dest.pause":                        "Pausar",
		"dest.resume":                       "Retomar",
		"dest.paused":                       "Pausado",
		"dest.paused_since":                 "desde %s",
		"dest.active":                       "Ativo",
		"dest.help":                         "Pausar segura as entregas e nunca as descarta; o recebimento continua. Retomar envia o que ficou retido.",
		"effects.title":                     "Registro de efeitos",
		"effects.help":                      "Efeitos em andamento, os deixados pela metade (pendentes, com a concessão vencida: a próxima reivindicação os assume) e os que falharam de vez. Reabrir libera um que falhou para a próxima reivindicação.",
		"effects.held":                      "Pendentes, com um dono agora",
		"effects.stale":                     "Pela metade",
		"effects.failed":                    "Falharam",
		"effects.none":                      "Nenhum.",
		"effects.reset":                     "Reabrir",
		"effects.lease_expires":             "Concessão vence",
		"effects.updated":                   "Atualizado",
		"audit.title":                       "Auditoria",
		"audit.none":                        "Nenhuma alteração feita ainda.",
		"audit.at":                          "Quando",
		"audit.actor":                       "Quem",
		"audit.action":                      "Ação",
		"audit.target":                      "Em",
		"audit.count":                       "Quantidade",
		"done.replay":                       "Reenviado: %s entregas na fila.",
		"done.replay_dry":                   "Simulação: %s entregas iriam para a fila.",
		"done.retry":                        "Tentando de novo: %s mensagens mortas na fila.",
		"done.purge":                        "Apagadas: %s mensagens mortas.",
		"done.pause":                        "Pausado.",
		"done.resume":                       "Retomado: as entregas retidas estão sendo enviadas.",
		"done.reset":                        "Reaberto: o efeito está livre para a próxima reivindicação.",
		"error.title":                       "Erro %d",
		"error.not_found":                   "Não encontrado.",
		"error.unauthorized":                "Entre primeiro.",
		"error.csrf":                        "Este formulário expirou (ou não veio desta página). Volte, recarregue e tente de novo.",
		"error.read_only":                   "Seu token é somente leitura.",
		"error.bad_request":                 "Essa requisição não é válida.",
		"error.unavailable":                 "O armazenamento está indisponível; tente daqui a pouco.",
		"error.internal":                    "Algo deu errado; o log do gateway diz o quê.",
		"live":                              "Ao vivo",
		"more":                              "Mais",
	},
}
