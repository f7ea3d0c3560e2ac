// Package setup is what a user does at a provider once a source exists:
// where to paste its intake URL, which events to pick, where the signing
// secret is. It is the one place these steps are written, in English and
// Brazilian Portuguese, for the CLI's answer to `sources create` and the
// dashboard's page after a create (many of our users run Hotmart, Mercado
// Pago, Asaas and WhatsApp operations in Brazil).
//
// The provider names their menus in the user's language; the steps name
// them as the provider's pages do in that language where known, else in
// English.
package setup

// Lang codes the steps are written in; any other reads English.
const (
	EN   = "en"
	PTBR = "pt-BR"
)

type steps struct {
	en, pt []string
}

// Steps lists what to do at the provider of preset (its name in the
// config: "stripe", "hotmart"; "" or one not listed gets the generic
// steps), in lang (EN or PTBR). The intake URL is not in them: the caller
// shows it beside them.
func Steps(preset, lang string) []string {
	s, ok := byPreset[preset]
	if !ok {
		s = generic
	}
	if lang == PTBR {
		return s.pt
	}
	return s.en
}

// Presets are the presets with steps of their own.
func Presets() []string {
	out := make([]string, 0, len(byPreset))
	for p := range byPreset {
		out = append(out, p)
	}
	return out
}

var generic = steps{
	en: []string{
		"In the sender's webhook settings, add an endpoint and paste the intake URL.",
		"Pick the events you want sent.",
		"Give the sender the same secret this source has (or give this source the secret the sender shows), as this source's signature settings say.",
	},
	pt: []string{
		"Nas configurações de webhook de quem envia, adicione um endpoint e cole a URL de entrada.",
		"Escolha os eventos que quer receber.",
		"Dê a quem envia o mesmo segredo desta origem (ou dê a esta origem o segredo que ele mostra), como dizem as configurações de assinatura desta origem.",
	},
}

var byPreset = map[string]steps{
	"stripe": {
		en: []string{
			"In the Stripe Dashboard open Developers → Webhooks and add an endpoint (event destination).",
			"Paste the intake URL as the endpoint URL.",
			"Select the events to send (e.g. checkout.session.completed, payment_intent.succeeded, invoice.paid).",
			"Open the endpoint, reveal its signing secret (whsec_…) and give it as this source's secret.",
		},
		pt: []string{
			"No Dashboard da Stripe abra Desenvolvedores → Webhooks e adicione um endpoint (destino de eventos).",
			"Cole a URL de entrada como URL do endpoint.",
			"Selecione os eventos a enviar (ex.: checkout.session.completed, payment_intent.succeeded, invoice.paid).",
			"Abra o endpoint, revele o segredo de assinatura (whsec_…) e use-o como segredo desta origem.",
		},
	},
	"github": {
		en: []string{
			"In the repository (or organization) open Settings → Webhooks → Add webhook.",
			"Paste the intake URL as the Payload URL, with Content type application/json.",
			"Type this source's secret in the Secret field.",
			"Choose \"Let me select individual events\" (e.g. push, pull_request) or send everything.",
		},
		pt: []string{
			"No repositório (ou organização) abra Settings → Webhooks → Add webhook.",
			"Cole a URL de entrada como Payload URL, com Content type application/json.",
			"Digite o segredo desta origem no campo Secret.",
			"Escolha \"Let me select individual events\" (ex.: push, pull_request) ou envie tudo.",
		},
	},
	"shopify": {
		en: []string{
			"In the Shopify admin open Settings → Notifications → Webhooks → Create webhook (an app subscribes in its configuration instead).",
			"Pick the event (topic, e.g. orders/create), format JSON, and paste the intake URL.",
			"The signing secret is shown under the webhooks list (\"Your webhooks will be signed with …\"), or is the app's client secret: give it as this source's secret.",
		},
		pt: []string{
			"No admin da Shopify abra Configurações → Notificações → Webhooks → Criar webhook (um app assina na sua própria configuração).",
			"Escolha o evento (tópico, ex.: orders/create), formato JSON, e cole a URL de entrada.",
			"O segredo de assinatura aparece abaixo da lista de webhooks (\"Seus webhooks serão assinados com …\"), ou é o client secret do app: use-o como segredo desta origem.",
		},
	},
	"hotmart": {
		en: []string{
			"In Hotmart open Tools → Webhook (API and notifications) and register a new configuration.",
			"Paste the intake URL, pick the product(s) and version 2.0.0.",
			"Pick the events (e.g. PURCHASE_APPROVED, PURCHASE_REFUNDED, PURCHASE_CHARGEBACK, SUBSCRIPTION_CANCELLATION).",
			"Copy your account's Hottok, shown on the same page, and give it as this source's secret.",
		},
		pt: []string{
			"Na Hotmart abra Ferramentas → Webhook (API e notificações) e cadastre uma nova configuração.",
			"Cole a URL de entrada, escolha o(s) produto(s) e a versão 2.0.0.",
			"Escolha os eventos (ex.: PURCHASE_APPROVED, PURCHASE_REFUNDED, PURCHASE_CHARGEBACK, SUBSCRIPTION_CANCELLATION).",
			"Copie o Hottok da sua conta, na mesma página, e use-o como segredo desta origem.",
		},
	},
	"whatsapp": {
		en: []string{
			"In Meta for Developers open your app → WhatsApp → Configuration → Webhook → Edit.",
			"Paste the intake URL as the Callback URL and this source's verify_token as the Verify token: Meta checks it at once.",
			"Subscribe to the webhook fields you need (messages).",
			"The signing secret is the app's App Secret (App settings → Basic): give it as this source's secret.",
		},
		pt: []string{
			"No Meta for Developers abra seu app → WhatsApp → Configuração → Webhook → Editar.",
			"Cole a URL de entrada como URL de callback e o verify_token desta origem como Token de verificação: a Meta confere na hora.",
			"Assine os campos de webhook de que precisa (messages).",
			"O segredo de assinatura é a Chave secreta do app (Configurações do app → Básico): use-a como segredo desta origem.",
		},
	},
	"evolution": {
		en: []string{
			"In Evolution API set the instance's webhook (the manager's Webhook tab, or POST /webhook/set/{instance}) and enable it.",
			"Paste the intake URL and pick the events (e.g. MESSAGES_UPSERT, MESSAGES_UPDATE).",
			"Send this source's secret as a header (apikey, or Authorization: Bearer), or the global webhook's URL as intake URL/SECRET: it sends no custom headers.",
		},
		pt: []string{
			"Na Evolution API configure o webhook da instância (aba Webhook do manager, ou POST /webhook/set/{instance}) e ative-o.",
			"Cole a URL de entrada e escolha os eventos (ex.: MESSAGES_UPSERT, MESSAGES_UPDATE).",
			"Envie o segredo desta origem num cabeçalho (apikey, ou Authorization: Bearer), ou use no webhook global a URL de entrada/SEGREDO: ele não envia cabeçalhos próprios.",
		},
	},
	"mercadopago": {
		en: []string{
			"In Mercado Pago's developer panel open Your integrations → your application → Webhooks → Configure notifications.",
			"Paste the intake URL (production mode; test mode has its own URL field).",
			"Pick the events (e.g. Payments, Orders) and save.",
			"Reveal the secret signature shown there and give it as this source's secret.",
		},
		pt: []string{
			"No painel de desenvolvedor do Mercado Pago abra Suas integrações → sua aplicação → Webhooks → Configurar notificações.",
			"Cole a URL de entrada (modo produção; o modo teste tem seu próprio campo de URL).",
			"Escolha os eventos (ex.: Pagamentos, Pedidos) e salve.",
			"Revele a assinatura secreta mostrada ali e use-a como segredo desta origem.",
		},
	},
	"asaas": {
		en: []string{
			"In Asaas open Integrations → Webhooks and add a webhook.",
			"Paste the intake URL and pick the events (e.g. PAYMENT_RECEIVED, PAYMENT_CONFIRMED, PAYMENT_OVERDUE).",
			"Type this source's secret as the authentication token (sent as asaas-access-token).",
		},
		pt: []string{
			"No Asaas abra Integrações → Webhooks e adicione um webhook.",
			"Cole a URL de entrada e escolha os eventos (ex.: PAYMENT_RECEIVED, PAYMENT_CONFIRMED, PAYMENT_OVERDUE).",
			"Digite o segredo desta origem como token de autenticação (enviado como asaas-access-token).",
		},
	},
	"slack": {
		en: []string{
			"At api.slack.com/apps open your app → Event Subscriptions and turn them on.",
			"Paste the intake URL as the Request URL: Slack checks it at once, and the gateway answers.",
			"Under Subscribe to bot events add the events you need (e.g. app_mention, message.channels).",
			"The signing secret is under Basic Information → App Credentials → Signing Secret: give it as this source's secret.",
		},
		pt: []string{
			"Em api.slack.com/apps abra seu app → Event Subscriptions e ative-as.",
			"Cole a URL de entrada como Request URL: o Slack confere na hora, e o gateway responde.",
			"Em Subscribe to bot events adicione os eventos de que precisa (ex.: app_mention, message.channels).",
			"O segredo de assinatura fica em Basic Information → App Credentials → Signing Secret: use-o como segredo desta origem.",
		},
	},
	"paddle": {
		en: []string{
			"In Paddle open Developer tools → Notifications → New destination, type Webhook.",
			"Paste the intake URL and pick the events (e.g. transaction.completed, subscription.updated).",
			"Copy the destination's secret key (pdl_ntfset_…) and give it as this source's secret.",
		},
		pt: []string{
			"Na Paddle abra Developer tools → Notifications → New destination, tipo Webhook.",
			"Cole a URL de entrada e escolha os eventos (ex.: transaction.completed, subscription.updated).",
			"Copie a chave secreta do destino (pdl_ntfset_…) e use-a como segredo desta origem.",
		},
	},
	"twilio": {
		en: []string{
			"In the Twilio Console open the phone number (or Messaging Service) → Configuration.",
			"Paste the intake URL, exactly, as the webhook for \"A message comes in\" (HTTP POST): Twilio signs the URL it calls.",
			"Twilio signs with the account's Auth Token (Account → API keys & tokens): give it as this source's secret.",
		},
		pt: []string{
			"No Console da Twilio abra o número (ou Messaging Service) → Configuration.",
			"Cole a URL de entrada, exatamente, como webhook de \"A message comes in\" (HTTP POST): a Twilio assina a URL que chama.",
			"A Twilio assina com o Auth Token da conta (Account → API keys & tokens): use-o como segredo desta origem.",
		},
	},
	"kiwify": {
		en: []string{
			"In Kiwify open Apps → Webhooks → Create webhook.",
			"Paste the intake URL and pick the products and events (e.g. approved purchase, refund, chargeback).",
			"Copy the webhook's token and give it as this source's secret.",
		},
		pt: []string{
			"Na Kiwify abra Apps → Webhooks → Criar webhook.",
			"Cole a URL de entrada e escolha os produtos e eventos (ex.: compra aprovada, reembolso, chargeback).",
			"Copie o token do webhook e use-o como segredo desta origem.",
		},
	},
	"eduzz": {
		en: []string{
			"In Eduzz's Developer Hub open Webhooks and create one.",
			"Paste the intake URL and pick the events.",
			"Copy the key shown for it and give it as this source's secret (Eduzz signs with it: x-signature).",
		},
		pt: []string{
			"No Developer Hub da Eduzz abra Webhooks e crie um.",
			"Cole a URL de entrada e escolha os eventos.",
			"Copie a chave mostrada e use-a como segredo desta origem (a Eduzz assina com ela: x-signature).",
		},
	},
	"pagarme": {
		en: []string{
			"In the Pagar.me dashboard open Settings → Webhooks → Create webhook.",
			"Paste the intake URL followed by /SECRET (this source's secret): v5 signs nothing, so the secret travels in the URL.",
			"Pick the events (e.g. order.paid, charge.paid, charge.refunded).",
		},
		pt: []string{
			"No dashboard da Pagar.me abra Configurações → Webhooks → Criar webhook.",
			"Cole a URL de entrada seguida de /SEGREDO (o segredo desta origem): a v5 não assina nada, então o segredo vai na URL.",
			"Escolha os eventos (ex.: order.paid, charge.paid, charge.refunded).",
		},
	},
	"svix": {
		en: []string{
			"In the sender's app portal (Svix) add an endpoint and paste the intake URL.",
			"Pick the event types to send.",
			"Copy the endpoint's signing secret (whsec_…) and give it as this source's secret.",
		},
		pt: []string{
			"No portal do app de quem envia (Svix) adicione um endpoint e cole a URL de entrada.",
			"Escolha os tipos de evento a enviar.",
			"Copie o segredo de assinatura do endpoint (whsec_…) e use-o como segredo desta origem.",
		},
	},
	"standard-webhooks": {
		en: []string{
			"In the sender's webhook settings add an endpoint and paste the intake URL.",
			"Pick the event types to send.",
			"Copy the endpoint's signing secret (whsec_…) and give it as this source's secret.",
		},
		pt: []string{
			"Nas configurações de webhook de quem envia adicione um endpoint e cole a URL de entrada.",
			"Escolha os tipos de evento a enviar.",
			"Copie o segredo de assinatura do endpoint (whsec_…) e use-o como segredo desta origem.",
		},
	},
}
